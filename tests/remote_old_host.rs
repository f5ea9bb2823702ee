//! `run --observe` of a host older than this iodig, over a real OpenSSH server on loopback
//! whose sessions report AlmaLinux 8.7's glibc 2.28 and kernel 4.18: iodig refuses to send
//! itself, sends the agent build instead (scripts/build-agent.sh) and says so, or fails with the
//! loader's own words when the host cannot load what it was sent.

mod common;

use common::agents::{no_agent_left, observe_local_host_args, one_at_a_time};
use common::sshd::Sshd;
use common::{is_root, read_json, run_step, IodigArgs};
use std::path::Path;

/// A "host" that reports AlmaLinux 8.7's glibc (2.28) and kernel (4.18.0-425): `getconf` and
/// `uname -r` first on its sessions' PATH say so, everything else is this machine's. Its HOME
/// is a directory of its own, so no iodig another test sent is found there.
struct OldHost {
    sshd: Sshd,
    home: std::path::PathBuf,
    dir: tempfile::TempDir,
}

impl OldHost {
    fn start() -> OldHost {
        OldHost::start_with(true, "")
    }

    /// `old_glibc`: `getconf` reports 2.28 (else this machine's glibc shows); `env`: more
    /// `NAME=value` for the sessions, after PATH and HOME.
    fn start_with(old_glibc: bool, env: &str) -> OldHost {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let bin = dir.path().join("bin");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let mut fakes = vec![(
            "uname",
            "#!/bin/sh\nif [ \"$1\" = -r ]; then echo 4.18.0-425.3.1.el8.x86_64; exit 0; fi\nexec /usr/bin/uname \"$@\"\n",
        )];
        if old_glibc {
            fakes.push((
                "getconf",
                "#!/bin/sh\nif [ \"$1\" = GNU_LIBC_VERSION ]; then echo 'glibc 2.28'; exit 0; fi\nexec /usr/bin/getconf \"$@\"\n",
            ));
        }
        for (name, script) in fakes {
            let p = bin.join(name);
            std::fs::write(&p, script).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        // sshd's own SetEnv: what every command of the host's sessions sees.
        let sshd = Sshd::start_with(
            &["127.0.0.1"],
            &format!(
                "SetEnv PATH={}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME={} {env}\n",
                bin.display(),
                home.display()
            ),
        );
        OldHost { sshd, home, dir }
    }

    /// The iodig binaries on the host.
    fn binaries(&self) -> Vec<String> {
        std::fs::read_dir(self.home.join(".cache/iodig/bin"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[test]
fn a_host_with_an_older_glibc_is_refused_and_a_build_put_where_it_says_is_used() {
    assert!(is_root(), "this test traces block IO: run it as root");
    let _one = one_at_a_time();
    let host = OldHost::start();
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    let out = tmp.path().join("runs");
    // No agent build to send instead (an `iodig-agent` beside this iodig would be one).
    let r = common::Run::of(
        IodigArgs::run_basic("workloadc", &out)
            .observe("127.0.0.1")
            .p(host.sshd.property())
            .command()
            .env("IODIG_AGENT", "")
            .output()
            .unwrap(),
    );
    assert_eq!(r.code(), 1, "{}", r.stderr);
    let said = r
        .stderr
        .lines()
        .find(|l| l.contains("--observe 127.0.0.1: the host has glibc 2.28"))
        .unwrap_or_else(|| panic!("the host, its glibc: {}", r.stderr));
    // The floor this binary states, and the symbols that force it.
    assert!(
        said.contains("this iodig needs glibc 2.") && said.contains("__libc_start_main"),
        "{said}"
    );
    // Both fixes: an agent build made here, or a build made on the host's OS.
    assert!(
        said.contains(
            "make an agent build that runs there with scripts/build-agent.sh 2.28 on this machine"
        ),
        "{said}"
    );
    assert!(!r.stderr.contains("sending iodig"), "{}", r.stderr);
    assert!(
        host.binaries().is_empty(),
        "nothing sent: {:?}",
        host.binaries()
    );
    assert!(
        !out.exists() || std::fs::read_dir(&out).unwrap().next().is_none(),
        "no run directory for a run that could not start"
    );
    // The fix it names: a build made for that host at the path it gives. (This machine's own
    // binary stands in for one built on AlmaLinux 8.7; the glibc the host reports is unchanged,
    // so only the build found there lets the run go on.)
    let at = said
        .split_once("put it at ")
        .and_then(|(_, rest)| rest.split_once(" there"))
        .map(|(path, _)| path)
        .unwrap_or_else(|| panic!("a path: {said}"));
    let target = std::path::PathBuf::from(at.replace("$HOME", host.home.to_str().unwrap()));
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_iodig"), &target).unwrap();
    let r = common::Run::of(
        observe_local_host_args(&host.sshd.config, &out, "2s")
            .command()
            .env("IODIG_AGENT", "")
            .output()
            .unwrap(),
    );
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert!(!r.stderr.contains("sending iodig"), "{}", r.stderr);
    // The kernel that version number names may lack what the tracer needs: said plainly, with
    // what iodig does then.
    assert!(
        r.stderr
            .contains("note: 127.0.0.1: kernel 4.18.0-425.3.1.el8.x86_64 predates Linux 5.12")
            && r.stderr.contains("/proc/diskstats"),
        "{}",
        r.stderr
    );
    let run = r.run_json();
    let observed = &run["cluster"]["observed"][0];
    assert!(
        observed["agent"]
            .as_str()
            .is_some_and(|a| a.contains("already on the host")),
        "{observed}"
    );
    assert!(
        observed["notes"].to_string().contains("block_io_start"),
        "{observed}"
    );
    // The kernel here has all the tracer needs: the host's part is still traced with eBPF.
    assert_eq!(run_step(&run)["nodes"][0]["trace_mode"], "ebpf", "{run}");
    no_agent_left(&host.sshd);
}

/// The agent build `scripts/build-agent.sh` makes: `IODIG_AGENT`, else `iodig-agent` beside
/// the iodig under test, where iodig itself looks.
fn agent_build() -> std::path::PathBuf {
    match std::env::var_os("IODIG_AGENT").filter(|p| !p.is_empty()) {
        Some(p) => p.into(),
        None => Path::new(env!("CARGO_BIN_EXE_iodig")).with_file_name("iodig-agent"),
    }
}

/// The brief's database server as far as iodig can tell (glibc 2.28, kernel 4.18 with BTF):
/// iodig reads the agent build's floor from the file, sends it instead of itself, says so in
/// one line, the agent runs there and traces with eBPF; the next run finds it there. Needs the
/// agent build, which scripts/test.sh makes first (`scripts/build-agent.sh`) and then requires
/// (`IODIG_REQUIRE_AGENT_BUILD=1`); a `cargo test` without one says loudly that it did not run.
#[test]
fn a_host_older_than_this_binary_is_sent_the_agent_build_and_it_observes() {
    assert!(is_root(), "this test traces block IO: run it as root");
    let agent = agent_build();
    if !agent.is_file() {
        assert!(
            std::env::var_os("IODIG_REQUIRE_AGENT_BUILD").is_none(),
            "no agent build at {}: scripts/build-agent.sh makes it (IODIG_REQUIRE_AGENT_BUILD is set, so this test must run)",
            agent.display()
        );
        eprintln!(
            "NOT RUN: no agent build at {} (run scripts/build-agent.sh, or set IODIG_AGENT); this test checks the send of one to a glibc 2.28 host",
            agent.display()
        );
        return;
    }
    // Its floor, read as iodig reads it, is the brief's server's glibc or older.
    let facts = iodig_runner::remote::elf::binary_facts(&agent).unwrap();
    let floor = facts
        .floor
        .clone()
        .expect("a dynamic agent build has a glibc floor");
    assert!(
        floor.version <= iodig_runner::remote::elf::Version(vec![2, 28]),
        "{}: {floor:?}",
        agent.display()
    );
    assert_eq!(facts.arch, std::env::consts::ARCH);
    eprintln!(
        "{}: {} build, needs glibc {} (for {})",
        agent.display(),
        facts.arch,
        floor.version,
        floor.symbols.join(", ")
    );
    let _one = one_at_a_time();
    let host = OldHost::start();
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    let out = tmp.path().join("runs");
    let run = || {
        common::Run::of(
            observe_local_host_args(&host.sshd.config, &out, "2s")
                .command()
                .env("IODIG_AGENT", &agent)
                .output()
                .unwrap(),
        )
    };
    let r = run();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let said: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.contains("the agent build") && l.contains(" has glibc "))
        .collect();
    assert_eq!(said.len(), 1, "one line says it: {}", r.stderr);
    assert!(
        !r.stderr.contains("the agent there was built from revision"),
        "the agent build is of this iodig's source: {}",
        r.stderr
    );
    assert!(
        said[0].starts_with("note: 127.0.0.1 has glibc 2.28, older than this iodig's floor (2.")
            && said[0].contains(&format!(
                "sending the agent build {} instead",
                agent.display()
            ))
            && said[0].contains(&format!("needs glibc {}", floor.version)),
        "{}",
        said[0]
    );
    eprintln!("{}", said[0]);
    assert!(!r.stderr.contains("sending iodig ("), "{}", r.stderr);
    // What landed there is the agent build, byte for byte.
    let sent = host.binaries();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(
        std::fs::read(host.home.join(".cache/iodig/bin").join(&sent[0])).unwrap(),
        std::fs::read(&agent).unwrap()
    );
    let run_json = r.run_json();
    let observed = &run_json["cluster"]["observed"][0];
    assert!(
        observed["agent"]
            .as_str()
            .is_some_and(|a| a.contains("agent build") && a.contains(" sent (")),
        "{observed}"
    );
    // The kernel the host names is said plainly; this machine's has what the tracer needs,
    // and the agent build's tracer (libbpf, libelf and zlib inside it) traces with eBPF.
    assert!(
        r.stderr
            .contains("note: 127.0.0.1: kernel 4.18.0-425.3.1.el8.x86_64 predates Linux 5.12"),
        "{}",
        r.stderr
    );
    let step = run_step(&run_json);
    assert_eq!(step["nodes"][0]["trace_mode"], "ebpf", "{run_json}");
    let node_dir = r.run_dir().join(step["nodes"][0]["dir"].as_str().unwrap());
    let trace = read_json(&node_dir.join("trace.json"));
    assert_eq!(trace["mode"], "ebpf", "{trace}");
    no_agent_left(&host.sshd);
    // The next run finds it there and sends nothing.
    let r = run();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("using the agent build already there ($HOME/.cache/iodig/bin/iodig-"),
        "{}",
        r.stderr
    );
    assert_eq!(host.binaries(), sent);
    no_agent_left(&host.sshd);
}

#[test]
fn a_host_that_cannot_load_the_sent_binary_fails_the_run_with_the_loaders_words() {
    let _one = one_at_a_time();
    // A glibc new enough, but an OpenSSL the dynamic loader cannot use, as a host without
    // OpenSSL 3 (AlmaLinux 8 has 1.1.1): a libssl.so.3 of its own, not a library at all, first
    // on the sessions' library path (no command of the probe or the copy links OpenSSL).
    let lib = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::write(lib.path().join("libssl.so.3"), "not a library").unwrap();
    let host = OldHost::start_with(false, &format!("LD_LIBRARY_PATH={}", lib.path().display()));
    assert!(host.dir.path().exists());
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    let out = tmp.path().join("runs");
    let r = IodigArgs::run_basic("workloadc", &out)
        .observe("127.0.0.1")
        .p(host.sshd.property())
        .output();
    assert_eq!(r.code(), 1, "{}", r.stderr);
    assert!(r.stderr.contains("sending iodig"), "{}", r.stderr);
    let said = r
        .stderr
        .lines()
        .find(|l| l.contains("--observe 127.0.0.1: iodig does not run on the host (x86_64, glibc "))
        .unwrap_or_else(|| panic!("the host and why: {}", r.stderr));
    assert!(
        said.contains("kernel 4.18.0-425.3.1.el8.x86_64)")
            && said.contains("libssl.so.3")
            && said.contains("put it at $HOME/.cache/iodig/bin/iodig-"),
        "{said}"
    );
    assert!(
        host.binaries().is_empty(),
        "the copy that cannot run is not kept: {:?}",
        host.binaries()
    );
    assert!(
        !out.exists() || std::fs::read_dir(&out).unwrap().next().is_none(),
        "no run directory for a run that could not start"
    );
}
