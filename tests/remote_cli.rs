//! `run --observe` over a real OpenSSH server on loopback: iodig's agent on the "remote" host
//! (this machine, reached through sshd) traces and samples each step, its files land per node,
//! its clock is compared, and what it measured equals what the local trace saw. What the agent
//! streams during a step, and what is kept when it is lost mid-step: tests/remote_stream.rs; a
//! host older than this iodig (the agent build): tests/remote_old_host.rs.

mod common;

use common::agents::{
    no_agent_left, observe_local_host_args, observed_rocksdb, one_at_a_time, wait_for_an_agent,
};
use common::sshd::Sshd;
use common::{is_root, read_json, run_step, IodigArgs};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// IOs per (device, op, second) over the seconds the trace covered whole.
fn whole_seconds(trace: &Value) -> BTreeMap<(String, String, u64), u64> {
    let mut m = BTreeMap::new();
    for d in trace["devices"].as_array().unwrap() {
        let name = d["info"]["name"].as_str().unwrap_or("?").to_string();
        for s in d["seconds"].as_array().unwrap() {
            if s["covered_ms"].as_u64() != Some(1000) {
                continue;
            }
            for (op, o) in s["ops"].as_object().unwrap() {
                m.insert(
                    (name.clone(), op.clone(), s["unix_ms"].as_u64().unwrap()),
                    o["ios"].as_u64().unwrap(),
                );
            }
        }
    }
    m
}

#[test]
fn observe_over_ssh_records_each_step_per_node_and_matches_the_local_trace() {
    assert!(is_root(), "this test traces block IO: run it as root");
    let _one = one_at_a_time();
    let sshd = Sshd::start(&["127.0.0.1"]);
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    let out = tmp.path().join("runs");
    let r = observed_rocksdb(&sshd, "2", "4s", &out).output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let run = r.run_json();
    let observed = &run["cluster"]["observed"][0];
    assert_eq!(observed["host"], "127.0.0.1", "{run}");
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    assert_eq!(observed["boot_id"], boot_id.trim(), "same kernel");
    assert!(
        observed["agent"].as_str().unwrap().contains("runs as root"),
        "{observed}"
    );
    // No Cassandra node on a RocksDB run: the host is observed without one, and says so.
    assert!(observed["node"].is_null());
    assert!(
        observed["notes"][0]
            .as_str()
            .unwrap()
            .contains("no rocksdb node"),
        "{observed}"
    );

    let steps = run["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "load + one run step");
    let mut compared_seconds = 0;
    for step in steps {
        let nodes = step["nodes"].as_array().unwrap();
        assert_eq!(nodes.len(), 1, "{step}");
        let node = &nodes[0];
        assert!(node["partial"].is_null(), "{node}");
        for clock in [&node["clock_before"], &node["clock_after"]] {
            let rtt = clock["rtt_ms"].as_f64().unwrap();
            let offset = clock["offset_ms"].as_f64().unwrap();
            assert!(rtt > 0.0 && rtt < 1000.0, "{clock}");
            // One machine, one clock: the offset is within the round trip.
            assert!(offset.abs() <= rtt, "{clock}");
        }
        assert_eq!(node["applied_offset_ms"], 0, "{node}");
        assert_eq!(node["trace_mode"], "ebpf", "{node}");
        let node_dir = r.run_dir().join(node["dir"].as_str().unwrap());
        for f in [
            "trace.json.gz",
            "trace-seconds.jsonl.gz",
            "sys.json",
            "sys-samples.jsonl.gz",
            "db-events.jsonl.gz",
            "device-stats.json",
        ] {
            assert!(node_dir.join(f).is_file(), "{f} missing");
        }
        // The host's disks' own statistics, read by its agent: on this one machine, what the
        // local reader found for the same disk, word for word (vda here: why it has none; an
        // NVMe disk: its controller).
        let step_dir = r.run_dir().join(step["dir"].as_str().unwrap());
        let disks = |doc: &Value| {
            doc["devices"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| {
                    let name = d["device"].as_str().unwrap().to_string();
                    (name, (d["controller"].clone(), d["unavailable"].clone()))
                })
                .collect::<BTreeMap<_, _>>()
        };
        let local_stats = disks(&read_json(&step_dir.join("device-stats.json")));
        let remote_stats = disks(&read_json(&node_dir.join("device-stats.json")));
        assert!(!remote_stats.is_empty(), "the agent read no disk");
        let remote_trace = read_json(&node_dir.join("trace.json"));
        for d in remote_trace["devices"].as_array().unwrap() {
            let name = d["name"].as_str().unwrap();
            assert!(remote_stats.contains_key(name), "{name} traced, not read");
        }
        for (name, said) in &remote_stats {
            if let Some(here) = local_stats.get(name) {
                assert_eq!(said, here, "{name}: the agent and iodig disagree");
            }
        }
        // The remote observer and the local tracer saw the same device through the same
        // kernel: in every second both covered whole, the same IOs. The one exception either
        // tracer declares: an IO whose completion the kernel did not run its program for is
        // counted when its request is used again, possibly a second later
        // (`completions_unseen`), so it may move one IO from one second to another.
        let local_doc = read_json(
            &r.run_dir()
                .join(step["dir"].as_str().unwrap())
                .join("trace.json"),
        );
        let remote_doc = read_json(&node_dir.join("trace.json"));
        let unseen = |doc: &Value| {
            doc["self_check"]["completions_unseen"]
                .as_u64()
                .unwrap_or(0)
        };
        let moved = unseen(&local_doc) + unseen(&remote_doc);
        let (local, remote) = (whole_seconds(&local_doc), whole_seconds(&remote_doc));
        let mut differ = 0;
        for (key, ios) in &local {
            if let Some(r_ios) = remote.get(key) {
                differ += ios.abs_diff(*r_ios);
                assert!(
                    ios.abs_diff(*r_ios) <= moved,
                    "{key:?}: local {ios}, remote {r_ios}, completions the tracers found unseen: {moved}"
                );
                compared_seconds += 1;
            }
        }
        assert!(
            differ <= 2 * moved,
            "{differ} IOs differ over the step, with {moved} completions found unseen"
        );
        let sys = read_json(&node_dir.join("sys.json"));
        assert!(!sys["samples"].as_array().unwrap().is_empty(), "{sys}");
    }
    assert!(
        compared_seconds >= 3,
        "only {compared_seconds} seconds in common"
    );
    // The report shows the observed host with its clock, and each step's node table.
    let report = std::fs::read_to_string(r.run_dir().join("report.md")).unwrap();
    assert!(report.contains("## Cluster"), "no cluster section");
    assert!(report.contains("| 127.0.0.1 |"), "no row for the host");
    assert_eq!(report.matches("### Nodes").count(), steps.len());
    let vda_line = report
        .lines()
        .any(|l| l.contains("127.0.0.1: ") && l.contains("not an NVMe device"));
    let nvme_table = report.contains("#### 127.0.0.1: ");
    assert!(
        vda_line || nvme_table,
        "the host's disks under \"The drive's own statistics\""
    );
    no_agent_left(&sshd);
}

#[test]
fn ctrl_c_stops_the_remote_agent_too() {
    assert!(is_root(), "this test traces block IO: run it as root");
    let _one = one_at_a_time();
    let sshd = Sshd::start(&["127.0.0.1"]);
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    let out = tmp.path().join("runs");
    let child = IodigArgs::run()
        .db("basic")
        .workload("workloadc")
        .p(sshd.property())
        .threads("1")
        .duration("60s")
        .observe("127.0.0.1")
        .out(&out)
        .command()
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the run step is under way (its agent started), then interrupt.
    wait_for_an_agent(&sshd);
    std::thread::sleep(Duration::from_secs(4));
    // SAFETY: signalling the child this test started, by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    // 130: interrupted, as after any Ctrl-C.
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    let dir = stderr
        .lines()
        .find_map(|l| l.strip_prefix("results: "))
        .unwrap();
    let run = read_json(&Path::new(dir.trim()).join("run.json"));
    assert_eq!(run["status"], "interrupted");
    // The interrupted step still has the host's part, written after the stop.
    let last = run["steps"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["nodes"][0]["host"], "127.0.0.1", "{last}");
    no_agent_left(&sshd);
    drop(sshd);
}

#[test]
fn bad_observe_values_are_refused_before_anything_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().to_str().unwrap();
    for (value, says) in [
        ("-oProxyCommand=touch_x", "not a host name"),
        ("db1:0", "port is not a number from 1 to 65535"),
        ("u@", "user or host missing"),
    ] {
        let flag = format!("--observe={value}");
        let r = IodigArgs::run_basic("workloadc", out).arg(&flag).output();
        assert_eq!(r.code(), 2, "{value}: {}", r.stderr);
        assert!(r.stderr.contains("--observe"), "{}", r.stderr);
        assert!(r.stderr.contains(says), "{value}: {}", r.stderr);
    }
    let r = IodigArgs::run_basic("workloadc", out)
        .observe("db1,db1")
        .output();
    assert_eq!(r.code(), 2, "{}", r.stderr);
    assert!(r.stderr.contains("given twice"), "{}", r.stderr);
    let r = IodigArgs::run_basic("workloadc", out)
        .observe("db1")
        .p("ssh.config=/nonexistent/ssh_config")
        .output();
    assert_eq!(r.code(), 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("ssh.config=/nonexistent/ssh_config"),
        "{}",
        r.stderr
    );
    // Nothing was created for these runs: the out directory holds no run directory.
    let made: Vec<_> = std::fs::read_dir(out).unwrap().flatten().collect();
    assert!(made.is_empty(), "{made:?}");
}

#[test]
fn an_unreachable_host_fails_the_run_with_its_name_and_the_fix() {
    let sshd = Sshd::start(&["127.0.0.1"]);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().to_str().unwrap();
    // 127.0.0.4 has no sshd listening: connection refused, at once.
    let r = IodigArgs::run_basic("workloadc", out)
        .observe("127.0.0.4")
        .p(sshd.property())
        .output();
    assert_eq!(r.code(), 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("--observe 127.0.0.4: ssh failed"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("sshd runs there"), "{}", r.stderr);
    assert!(
        std::fs::read_dir(out).unwrap().next().is_none(),
        "no run directory for a run that could not start"
    );
}

#[test]
fn a_refused_key_fails_the_run_with_the_host_and_the_fix() {
    let sshd = Sshd::start(&["127.0.0.1"]);
    let tmp = tempfile::tempdir().unwrap();
    // The same server, but a key it does not know.
    let key = tmp.path().join("stranger");
    let made = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&key)
        .status()
        .unwrap();
    assert!(made.success());
    let config = tmp.path().join("ssh_config");
    std::fs::write(
        &config,
        format!(
            "Host 127.0.0.*\n  Port {}\n  User root\n  IdentityFile {}\n  IdentitiesOnly yes\n  \
             StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n",
            sshd.port,
            key.display()
        ),
    )
    .unwrap();
    let out = tmp.path().join("runs");
    let r = IodigArgs::run_basic("workloadc", &out)
        .observe("127.0.0.1")
        .p(format!("ssh.config={}", config.display()))
        .output();
    assert_eq!(r.code(), 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("--observe 127.0.0.1: ssh failed")
            && r.stderr.contains("Permission denied"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("give ssh a key it can use without a prompt"),
        "{}",
        r.stderr
    );
    assert!(
        !out.exists() || std::fs::read_dir(&out).unwrap().next().is_none(),
        "no run directory for a run that could not start"
    );
}

/// A short RocksDB run here that observes 127.0.0.1 through `config` (an ssh_config).
fn observe_local_host(config: &Path, out: &Path, duration: &str) -> common::Run {
    common::Run::of(
        observe_local_host_args(config, out, duration)
            .command()
            .output()
            .expect("iodig runs"),
    )
}

/// A login of its own on this machine, for an observed host where iodig is not root; removed
/// (home included) on drop.
struct TestUser(String);

impl TestUser {
    fn create() -> TestUser {
        let name = format!("iodigobs{}", std::process::id());
        let home = format!("/var/tmp/{name}-home");
        let ok = std::process::Command::new("useradd")
            // `*`: no password, and not a locked account (sshd refuses those even with a key).
            .args([
                "--create-home",
                "--home-dir",
                &home,
                "--shell",
                "/bin/sh",
                "--password",
                "*",
                &name,
            ])
            .status()
            .unwrap()
            .success();
        assert!(ok, "useradd {name} failed");
        TestUser(name)
    }
}

impl Drop for TestUser {
    fn drop(&mut self) {
        let _ = std::process::Command::new("userdel")
            .args(["--remove", "--force", &self.0])
            .status();
    }
}

#[test]
fn a_host_where_iodig_is_not_root_falls_back_to_diskstats_and_says_so() {
    assert!(
        is_root(),
        "this test traces block IO and adds a user: run it as root"
    );
    let _one = one_at_a_time();
    let user = TestUser::create();
    let sshd = Sshd::start(&["127.0.0.1"]);
    // sshd reads authorized_keys as the user logging in.
    use std::os::unix::fs::PermissionsExt;
    let sshd_dir = sshd.config.parent().unwrap();
    std::fs::set_permissions(sshd_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(
        sshd_dir.join("authorized_keys"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    // The same server and key, as that user (no password-less sudo there).
    let config = tmp.path().join("ssh_config");
    let text = std::fs::read_to_string(&sshd.config).unwrap();
    std::fs::write(
        &config,
        text.replace("User root", &format!("User {}", user.0)),
    )
    .unwrap();
    let out = tmp.path().join("runs");
    let r = observe_local_host(&config, &out, "2s");
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("127.0.0.1: not root and no password-less sudo here: block IO from /proc/diskstats, not eBPF"),
        "said once, with the host: {}",
        r.stderr
    );
    let run = r.run_json();
    let step = run_step(&run);
    assert_eq!(
        step["trace_mode"], "ebpf",
        "this machine keeps eBPF: {step}"
    );
    assert_eq!(step["nodes"][0]["trace_mode"], "diskstats", "{step}");
    assert!(
        run["cluster"]["observed"][0]["notes"]
            .to_string()
            .contains("/proc/diskstats"),
        "{}",
        run["cluster"]
    );
    no_agent_left(&sshd);
}

/// libfaketime's library, which scripts/test.sh installs.
fn libfaketime() -> std::path::PathBuf {
    let found = std::fs::read_dir("/usr/lib")
        .unwrap()
        .flatten()
        .map(|e| e.path().join("faketime/libfaketime.so.1"))
        .find(|p| p.is_file());
    found.expect("libfaketime missing: run scripts/test.sh (apt-get install libfaketime)")
}

#[test]
fn a_host_whose_clock_is_off_is_warned_about_and_put_on_this_clock() {
    assert!(is_root(), "this test traces block IO: run it as root");
    let _one = one_at_a_time();
    // The "host" runs 5 s ahead: every command of its sessions sees the wall clock through
    // libfaketime (its monotonic clock, which the kernel's IO timestamps count in, stays true).
    let sshd = Sshd::start_with(
        &["127.0.0.1"],
        "AcceptEnv LD_PRELOAD FAKETIME FAKETIME_DONT_FAKE_MONOTONIC\n",
    );
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    let config = tmp.path().join("ssh_config");
    let mut text = std::fs::read_to_string(&sshd.config).unwrap();
    text.push_str(&format!(
        "  SetEnv LD_PRELOAD={} FAKETIME=+5s FAKETIME_DONT_FAKE_MONOTONIC=1\n",
        libfaketime().display()
    ));
    std::fs::write(&config, text).unwrap();
    let out = tmp.path().join("runs");
    let r = observe_local_host(&config, &out, "3s");
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("warning: 127.0.0.1: its clock is +5")
            && r.stderr.contains("ms off this machine's"),
        "{}",
        r.stderr
    );
    let run = r.run_json();
    let step = run_step(&run);
    let node = &step["nodes"][0];
    for c in ["clock_before", "clock_after"] {
        let off = node[c]["offset_ms"].as_f64().unwrap();
        assert!((off - 5000.0).abs() < 250.0, "{c}: {off} ms: {node}");
    }
    let applied = node["applied_offset_ms"].as_f64().unwrap();
    assert!((applied - 5000.0).abs() < 250.0, "{node}");
    // Its trace, shifted onto this machine's clock, covers the same window as the local one.
    let local = read_json(
        &r.run_dir()
            .join(step["dir"].as_str().unwrap())
            .join("trace.json"),
    );
    let remote = read_json(
        &r.run_dir()
            .join(node["dir"].as_str().unwrap())
            .join("trace.json"),
    );
    for edge in ["start_unix_ms", "end_unix_ms"] {
        let (l, h) = (
            local[edge].as_i64().unwrap(),
            remote[edge].as_i64().unwrap(),
        );
        assert!(
            (l - h).abs() < 500,
            "{edge}: local {l}, host {h} after the shift"
        );
    }
    no_agent_left(&sshd);
}
