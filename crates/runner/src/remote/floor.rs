//! What iodig's own binary needs of a host before it runs there (`--observe`, `--clients`): the
//! host probed (architecture, glibc, kernel, BTF), held against what the binary needs (its
//! architecture and glibc floor, read from the file by [`super::elf`]), and what the block-IO
//! tracer needs of the kernel. A host older than this binary's floor may be sent the agent build
//! instead (`scripts/build-agent.sh`: `iodig agent` linked against an older glibc), chosen here
//! by the floor read from that file.

use super::elf::{BinaryFacts, GlibcFloor, Version};

/// The host's glibc from `getconf GNU_LIBC_VERSION` (`glibc 2.28`) or the first line of
/// `ldd --version` (`ldd (GNU libc) 2.28`, `ldd (Debian GLIBC 2.36-9+deb12u14) 2.36`): the
/// last word that is a version. None on a host without glibc (musl's ldd names no version).
pub fn host_glibc(said: &str) -> Option<Version> {
    let first = said.lines().map(str::trim).find(|l| !l.is_empty())?;
    first.split_whitespace().rev().find_map(Version::parse)
}

/// What one SSH command learnt of a host before iodig runs anything there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostProbe {
    /// The binary at the remote path: Some(Ok) when it ran (`--version`), Some(Err) with the
    /// first line it (or the dynamic loader) said when it did not, None when there is none.
    pub binary: Option<Result<(), String>>,
    /// The agent build at its remote path, as `binary` (None also when none was asked about).
    pub agent_binary: Option<Result<(), String>>,
    /// `uname -m`.
    pub arch: String,
    /// The host's glibc; None when it reported none.
    pub glibc: Option<Version>,
    /// `uname -r`.
    pub kernel: String,
    /// `/sys/kernel/btf/vmlinux` exists; None when the probe did not say.
    pub btf: Option<bool>,
}

/// The probe's shell: one line `key=value` each, so a missing tool leaves its value empty
/// instead of shifting the others. `bin` is "runs", "fails FIRST-LINE" or "missing"; so is
/// `agent_bin`, for the agent build's remote path when there is one to ask about.
pub fn probe_script(remote_bin: &str, remote_agent: Option<&str>) -> String {
    let ran = |key: &str, path: &str| {
        format!(
            "b=\"{path}\"; \
             if [ -x \"$b\" ]; then if e=$(\"$b\" --version 2>&1); then echo {key}=runs; else echo \"{key}=fails $(printf '%s\\n' \"$e\" | head -n 1)\"; fi; else echo {key}=missing; fi; "
        )
    };
    format!(
        "{}{}\
         echo \"arch=$(uname -m)\"; \
         echo \"glibc=$( (getconf GNU_LIBC_VERSION || ldd --version) 2>/dev/null | head -n 1)\"; \
         echo \"kernel=$(uname -r)\"; \
         if [ -e /sys/kernel/btf/vmlinux ]; then echo btf=yes; else echo btf=no; fi",
        ran("bin", remote_bin),
        remote_agent.map_or(String::new(), |a| ran("agent_bin", a)),
    )
}

/// `runs`, `missing` or `fails FIRST-LINE`, as the probe says of a binary.
fn ran(said: &str) -> Option<Result<(), String>> {
    match said {
        "runs" => Some(Ok(())),
        "missing" => None,
        _ => Some(Err(said
            .strip_prefix("fails")
            .unwrap_or(said)
            .trim()
            .to_string())),
    }
}

impl HostProbe {
    /// Reads [`probe_script`]'s output.
    pub fn parse(out: &str) -> HostProbe {
        let mut p = HostProbe::default();
        for l in out.lines() {
            let Some((k, v)) = l.split_once('=') else {
                continue;
            };
            let v = v.trim();
            match k {
                "bin" => p.binary = ran(v),
                "agent_bin" => p.agent_binary = ran(v),
                "arch" => p.arch = v.to_string(),
                "glibc" => p.glibc = host_glibc(v),
                "kernel" => p.kernel = v.to_string(),
                "btf" => p.btf = Some(v == "yes"),
                _ => {}
            }
        }
        p
    }
}

/// The agent build iodig may send instead of itself (`--observe` only: `--clients` hosts run
/// the whole client, which the agent build is not), as found where iodig looks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentBuild<'a> {
    /// Not for this use.
    NotApplicable,
    /// No file at `path`, where iodig looks.
    Missing {
        /// Where iodig looks (`IODIG_AGENT`, else `iodig-agent` beside this binary).
        path: &'a str,
    },
    /// A file at `path`, and what it is built for (or why it cannot be read).
    Found {
        /// Its local path.
        path: &'a str,
        /// Read from the file, never from its name.
        facts: Result<&'a BinaryFacts, &'a str>,
    },
}

/// Which binary goes to a host, from what the probe saw there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// This very binary: the host can run it (as far as the probe tells: its first run there
    /// is the last word).
    Own,
    /// The agent build, since the host cannot run this binary; `why` says so in words
    /// (`has glibc 2.28, older than this iodig's floor (2.34)`).
    AgentBuild {
        /// Why not this binary.
        why: String,
    },
    /// Neither: the message names the host, why, and the fixes.
    Refuse(String),
}

/// Chooses between this binary (built for `arch`, needing `own_floor`) and the agent build for
/// the host the probe describes. `label` names the host (`--observe db1`), `remote` is where a
/// build made on the host's OS would be used. The agent build is sent only when this binary
/// cannot run there, and only when its own architecture and floor fit the host.
pub fn choose(
    label: &str,
    remote: &str,
    probe: &HostProbe,
    arch: &str,
    own_floor: Option<&GlibcFloor>,
    agent: &AgentBuild,
) -> Choice {
    let host_arch = if probe.arch.is_empty() {
        arch
    } else {
        &probe.arch
    };
    let why = if host_arch != arch {
        format!("is {host_arch}, this iodig is built for {arch}")
    } else {
        match (own_floor, &probe.glibc) {
            (Some(f), Some(g)) if *g < f.version => format!(
                "has glibc {g}, this iodig needs glibc {} or newer (for {})",
                f.version,
                symbols_text(&f.symbols)
            ),
            // A host that names no glibc (musl, or no getconf and no ldd) is not refused on
            // a guess: the binary's first run there tells.
            _ => return Choice::Own,
        }
    };
    let fits = |facts: &BinaryFacts| -> Result<(), String> {
        if facts.arch != host_arch {
            return Err(format!("is built for {}", facts.arch));
        }
        match (&facts.floor, &probe.glibc) {
            (Some(f), Some(g)) if *g < f.version => Err(format!(
                "needs glibc {} or newer (for {})",
                f.version,
                symbols_text(&f.symbols)
            )),
            _ => Ok(()),
        }
    };
    // What the agent build could not do, and the fix that makes one.
    let make = |g: &Version| format!("scripts/build-agent.sh {g}");
    let agent_fix = match (agent, &probe.glibc) {
        (AgentBuild::NotApplicable, _) => None,
        (AgentBuild::Found { facts: Ok(facts), .. }, _) if fits(facts).is_ok() => {
            let why = match (own_floor, &probe.glibc) {
                (Some(f), Some(g)) if host_arch == arch => {
                    format!("has glibc {g}, older than this iodig's floor ({})", f.version)
                }
                _ => why,
            };
            return Choice::AgentBuild { why };
        }
        // Another architecture: zig could build for it, but this machine's Rust has no
        // standard library for it (rustup target add needs the internet).
        (_, _) if host_arch != arch => None,
        (AgentBuild::Missing { path }, Some(g)) => Some(format!(
            "make an agent build that runs there with {} on this machine (iodig sends the build it finds at {path} instead of itself), or ",
            make(g)
        )),
        (AgentBuild::Found { path, facts }, Some(g)) => Some(format!(
            "the agent build at {path} {}, so make one with {} on this machine, or ",
            match facts {
                Ok(facts) => fits(facts).err().unwrap_or_default(),
                Err(e) => format!("cannot be read ({e})"),
            },
            make(g)
        )),
        (_, None) => None,
    };
    let os = match &probe.glibc {
        Some(g) if host_arch == arch => format!("on that host's OS (glibc {g})"),
        _ => "on that host".to_string(),
    };
    Choice::Refuse(format!(
        "{label}: the host {why}; {}build iodig {os} and put it at {remote} there: iodig runs the build it finds there instead of sending this one",
        agent_fix.unwrap_or_default()
    ))
}

/// At most six symbols, then how many more: enough to show what forces the floor.
fn symbols_text(symbols: &[String]) -> String {
    const SHOWN: usize = 6;
    let mut s = symbols
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if symbols.len() > SHOWN {
        s.push_str(&format!(" and {} more", symbols.len() - SHOWN));
    }
    s
}

/// An agent that is not this iodig's source: another version, or (both known) another git
/// revision, as an agent build left over from an older tree would be; None when they agree.
pub fn version_note(agent: (&str, Option<&str>), own: (&str, Option<&str>)) -> Option<String> {
    let ((agent_version, agent_rev), (own_version, own_rev)) = (agent, own);
    if !agent_version.is_empty() && agent_version != own_version {
        return Some(format!(
            "the agent there is iodig {agent_version}, this is {own_version}: build the host's copy from the same source"
        ));
    }
    match (agent_rev, own_rev) {
        (Some(a), Some(o)) if a != o => Some(format!(
            "the agent there was built from revision {a}, this iodig from {o}: rebuild it from the same source (scripts/build-agent.sh for the agent build)"
        )),
        _ => None,
    }
}

/// The upstream release that has every BPF feature the tracer uses: raw tracepoints with BTF
/// (5.5), global functions (5.6), the ring buffer (5.8), atomic fetch-and-add (5.12).
pub const TRACER_KERNEL: (u32, u32) = (5, 12);
/// `block_io_start`, which attribution hooks (6.5).
pub const ATTRIBUTION_KERNEL: (u32, u32) = (6, 5);

/// `4.18.0-425.3.1.el8.x86_64` → (4, 18).
pub fn kernel_release(release: &str) -> Option<(u32, u32)> {
    let mut it = release
        .split(|c: char| !c.is_ascii_digit())
        .map(str::parse::<u32>);
    Some((it.next()?.ok()?, it.next()?.ok()?))
}

/// The kernel as the notes name it.
fn kernel_name(probe: &HostProbe) -> &str {
    if probe.kernel.is_empty() {
        "the kernel"
    } else {
        &probe.kernel
    }
}

/// Why the eBPF tracer cannot run on the host at all, when the probe says so: no kernel BTF.
pub fn lacks_btf(probe: &HostProbe) -> Option<String> {
    (probe.btf == Some(false)).then(|| {
        format!(
            "kernel {} has no BTF (/sys/kernel/btf/vmlinux is missing; it needs CONFIG_DEBUG_INFO_BTF=y), which the eBPF tracer needs for the kernel's types",
            kernel_name(probe)
        )
    })
}

/// Why `--trace ebpf`, asked for by name, cannot be had on the host (exit 3, as on this
/// machine), or None; `--trace auto` takes /proc/diskstats there instead.
pub fn ebpf_refusal(label: &str, probe: &HostProbe, ebpf_demanded: bool) -> Option<String> {
    let lack = lacks_btf(probe).filter(|_| ebpf_demanded)?;
    Some(format!(
        "{label}: --trace ebpf: {lack}; use --trace auto to take /proc/diskstats there"
    ))
}

/// What the host's kernel lacks for the eBPF tracer, one plain line each, saying what iodig does
/// instead. Empty when nothing is known to be missing, and when no eBPF trace was asked for.
pub fn kernel_notes(probe: &HostProbe, ebpf_wanted: bool) -> Vec<String> {
    if !ebpf_wanted {
        return Vec::new();
    }
    if let Some(lack) = lacks_btf(probe) {
        return vec![format!(
            "{lack}: this host's block IO comes from /proc/diskstats (iostat's per-second figures: no IO sizes, no latency histograms, no attribution)"
        )];
    }
    let k = kernel_name(probe);
    let mut notes = Vec::new();
    let Some(v) = kernel_release(&probe.kernel) else {
        return notes;
    };
    if v < TRACER_KERNEL {
        notes.push(format!(
            "kernel {k} predates Linux {}.{}, the upstream release with every BPF feature the tracer uses (BTF tracepoints, ring buffer, atomic fetch-and-add); a distribution kernel that backports them (RHEL and AlmaLinux 8 backport BPF from later releases) may load it: it is tried, and if it does not load, this host's block IO comes from /proc/diskstats and iodig says why",
            TRACER_KERNEL.0, TRACER_KERNEL.1
        ));
    }
    if v < ATTRIBUTION_KERNEL {
        notes.push(format!(
            "kernel {k} predates Linux {}.{}'s block_io_start tracepoint: unless it is backported, this host's IO is not attributed to processes, threads or cgroups (the trace says so)",
            ATTRIBUTION_KERNEL.0, ATTRIBUTION_KERNEL.1
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::elf::own_glibc_floor;
    use std::path::Path;
    use std::process::Command;

    #[test]
    fn a_hosts_glibc_is_the_last_version_its_tools_say() {
        let v = |s: &str| Version::parse(s).unwrap();
        assert_eq!(host_glibc("glibc 2.28"), Some(v("2.28")));
        assert_eq!(
            host_glibc("ldd (GNU libc) 2.28\nCopyright"),
            Some(v("2.28"))
        );
        assert_eq!(
            host_glibc("ldd (Debian GLIBC 2.36-9+deb12u14) 2.36"),
            Some(v("2.36"))
        );
        assert_eq!(host_glibc("musl libc (x86_64)"), None);
        assert_eq!(host_glibc(""), None);
    }

    fn floor_2_34() -> GlibcFloor {
        GlibcFloor {
            version: Version(vec![2, 34]),
            symbols: [
                "__libc_start_main",
                "dlclose",
                "dlerror",
                "dlopen",
                "dlsym",
                "pthread_create",
                "pthread_join",
            ]
            .map(String::from)
            .to_vec(),
        }
    }

    fn almalinux_8_7() -> HostProbe {
        HostProbe::parse(
            "bin=missing\narch=x86_64\nglibc=glibc 2.28\nkernel=4.18.0-425.3.1.el8.x86_64\nbtf=yes\n",
        )
    }

    /// A refusal's message, or the choice that was not one.
    fn refused(c: Choice) -> String {
        match c {
            Choice::Refuse(m) => m,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn a_host_older_than_the_floor_is_refused_with_its_glibc_the_floor_and_the_fix() {
        let host = almalinux_8_7();
        let remote = "$HOME/.cache/iodig/bin/iodig-0123";
        let floor = floor_2_34();
        let none = AgentBuild::Missing {
            path: "/opt/iodig/iodig-agent",
        };
        let m = refused(choose(
            "--observe db1",
            remote,
            &host,
            "x86_64",
            Some(&floor),
            &none,
        ));
        for part in [
            "--observe db1: the host has glibc 2.28",
            "needs glibc 2.34 or newer",
            "__libc_start_main, dlclose",
            "and 1 more",
            "make an agent build that runs there with scripts/build-agent.sh 2.28 on this machine (iodig sends the build it finds at /opt/iodig/iodig-agent instead of itself)",
            "or build iodig on that host's OS (glibc 2.28)",
            remote,
        ] {
            assert!(m.contains(part), "{part:?} in {m}");
        }
        // `--clients` hosts run the whole client: no agent build is offered.
        let m = refused(choose(
            "--clients c1",
            remote,
            &host,
            "x86_64",
            Some(&floor),
            &AgentBuild::NotApplicable,
        ));
        assert!(
            !m.contains("build-agent") && m.contains("build iodig on that host's OS"),
            "{m}"
        );
        // As new as the floor or newer, no glibc named, or no floor known: not refused here.
        for glibc in ["2.34", "2.39"] {
            let mut h = host.clone();
            h.glibc = Version::parse(glibc);
            assert_eq!(
                choose("h", remote, &h, "x86_64", Some(&floor), &none),
                Choice::Own
            );
        }
        let mut musl = host.clone();
        musl.glibc = None;
        assert_eq!(
            choose("h", remote, &musl, "x86_64", Some(&floor), &none),
            Choice::Own
        );
        assert_eq!(
            choose("h", remote, &host, "x86_64", None, &none),
            Choice::Own
        );
        // Another architecture is said first: no glibc would help.
        let mut arm = host.clone();
        arm.arch = "aarch64".into();
        let m = refused(choose(
            "--observe db2",
            remote,
            &arm,
            "x86_64",
            Some(&floor),
            &none,
        ));
        assert!(
            m.starts_with("--observe db2: the host is aarch64, this iodig is built for x86_64; build iodig on that host and put it at"),
            "{m}"
        );
    }

    fn agent_facts(arch: &str, glibc: &str) -> BinaryFacts {
        BinaryFacts {
            arch: arch.into(),
            floor: Some(GlibcFloor {
                version: Version::parse(glibc).unwrap(),
                symbols: vec!["fcntl64".into(), "statx".into()],
            }),
        }
    }

    #[test]
    fn the_agent_build_goes_to_a_host_older_than_this_binary_when_its_own_floor_fits() {
        let host = almalinux_8_7();
        let remote = "$HOME/.cache/iodig/bin/iodig-0123";
        let floor = floor_2_34();
        let choose_with = |host: &HostProbe, facts: Result<&BinaryFacts, &str>| {
            choose(
                "--observe db1",
                remote,
                host,
                "x86_64",
                Some(&floor),
                &AgentBuild::Found {
                    path: "/opt/iodig/iodig-agent",
                    facts,
                },
            )
        };
        let at_2_28 = agent_facts("x86_64", "2.28");
        assert_eq!(
            choose_with(&host, Ok(&at_2_28)),
            Choice::AgentBuild {
                why: "has glibc 2.28, older than this iodig's floor (2.34)".into()
            }
        );
        // A host this binary runs on gets this binary, whatever agent build there is.
        let mut new = host.clone();
        new.glibc = Version::parse("2.36");
        assert_eq!(choose_with(&new, Ok(&at_2_28)), Choice::Own);
        // A static agent build (no glibc floor) fits any glibc.
        let static_build = BinaryFacts {
            arch: "x86_64".into(),
            floor: None,
        };
        assert!(matches!(
            choose_with(&host, Ok(&static_build)),
            Choice::AgentBuild { .. }
        ));
        // An agent build too new for the host: refused, saying what it needs and the fix.
        let at_2_31 = agent_facts("x86_64", "2.31");
        let m = refused(choose_with(&host, Ok(&at_2_31)));
        assert!(
            m.contains("the agent build at /opt/iodig/iodig-agent needs glibc 2.31 or newer (for fcntl64, statx), so make one with scripts/build-agent.sh 2.28 on this machine, or build iodig on that host's OS"),
            "{m}"
        );
        let m = refused(choose_with(&host, Err("not an ELF file")));
        assert!(
            m.contains("the agent build at /opt/iodig/iodig-agent cannot be read (not an ELF file), so make one with scripts/build-agent.sh 2.28"),
            "{m}"
        );
        // An agent build of another architecture never goes to this one's hosts, and serves a
        // host of its own architecture that this binary cannot.
        let arm_build = agent_facts("aarch64", "2.28");
        assert!(refused(choose_with(&host, Ok(&arm_build)))
            .contains("the agent build at /opt/iodig/iodig-agent is built for aarch64"));
        let mut arm = host.clone();
        arm.arch = "aarch64".into();
        assert_eq!(
            choose_with(&arm, Ok(&arm_build)),
            Choice::AgentBuild {
                why: "is aarch64, this iodig is built for x86_64".into()
            }
        );
        assert!(refused(choose_with(&arm, Ok(&at_2_28))).starts_with(
            "--observe db1: the host is aarch64, this iodig is built for x86_64; build iodig on that host"
        ));
    }

    #[test]
    fn an_agent_of_another_version_is_noted() {
        assert_eq!(version_note(("0.1.0", None), ("0.1.0", None)), None);
        assert_eq!(
            version_note(("", None), ("0.1.0", None)),
            None,
            "an agent that did not say"
        );
        assert_eq!(
            version_note(("0.1.0", Some("abc")), ("0.1.0", Some("abc"))),
            None
        );
        assert_eq!(
            version_note(("0.1.0", None), ("0.1.0", Some("abc"))),
            None,
            "a revision not known on one side proves nothing"
        );
        let stale = version_note(("0.1.0", Some("1a2b3c")), ("0.1.0", Some("4d5e6f"))).unwrap();
        assert!(
            stale.contains("1a2b3c")
                && stale.contains("4d5e6f")
                && stale.contains("build-agent.sh"),
            "{stale}"
        );
        let n = version_note(("0.0.9", None), ("0.1.0", None)).unwrap();
        assert!(n.contains("iodig 0.0.9, this is 0.1.0"), "{n}");
    }

    #[test]
    fn the_probe_reads_a_host_as_its_shell_reports_it() {
        let dir = tempfile::tempdir().unwrap();
        let probe = |bin: &Path| {
            let out = Command::new("sh")
                .arg("-c")
                .arg(probe_script(
                    bin.to_str().unwrap(),
                    Some("/nonexistent/iodig-agent"),
                ))
                .output()
                .unwrap();
            HostProbe::parse(&String::from_utf8_lossy(&out.stdout))
        };
        let here = probe(&dir.path().join("none"));
        assert_eq!(here.binary, None);
        assert_eq!(here.agent_binary, None);
        assert_eq!(here.arch, std::env::consts::ARCH);
        // This machine runs this test, so its glibc is at least the floor.
        let floor = own_glibc_floor().as_ref().unwrap().as_ref().unwrap();
        assert!(
            here.glibc.as_ref().is_some_and(|g| *g >= floor.version),
            "{here:?}"
        );
        assert!(kernel_release(&here.kernel).is_some(), "{here:?}");
        assert_eq!(
            here.btf,
            Some(Path::new("/sys/kernel/btf/vmlinux").exists())
        );
        // A copy that cannot start: the loader's first line is what iodig reports.
        let broken = dir.path().join("broken");
        std::fs::write(
            &broken,
            "#!/bin/sh\necho 'iodig: /lib64/libc.so.6: version `GLIBC_2.34'\\'' not found' >&2\necho second >&2\nexit 1\n",
        )
        .unwrap();
        std::fs::set_permissions(&broken, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        assert_eq!(
            probe(&broken).binary,
            Some(Err(
                "iodig: /lib64/libc.so.6: version `GLIBC_2.34' not found".into()
            ))
        );
        assert_eq!(probe(Path::new("/bin/true")).binary, Some(Ok(())));
        // The agent build's copy is asked about in the same probe.
        let out = Command::new("sh")
            .arg("-c")
            .arg(probe_script("/nonexistent/iodig", Some("/bin/true")))
            .output()
            .unwrap();
        let both = HostProbe::parse(&String::from_utf8_lossy(&out.stdout));
        assert_eq!((both.binary, both.agent_binary), (None, Some(Ok(()))));
    }

    #[test]
    fn a_kernel_without_what_the_tracer_needs_is_named_with_what_iodig_does_instead() {
        let mut no_btf = almalinux_8_7();
        no_btf.btf = Some(false);
        let notes = kernel_notes(&no_btf, true);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].starts_with("kernel 4.18.0-425.3.1.el8.x86_64 has no BTF")
                && notes[0].contains("/proc/diskstats"),
            "{notes:?}"
        );
        let m = ebpf_refusal("--observe db1", &no_btf, true).unwrap();
        assert!(
            m.starts_with(
                "--observe db1: --trace ebpf: kernel 4.18.0-425.3.1.el8.x86_64 has no BTF"
            ) && m.ends_with("use --trace auto to take /proc/diskstats there"),
            "{m}"
        );
        assert_eq!(ebpf_refusal("h", &no_btf, false), None);
        assert_eq!(ebpf_refusal("h", &almalinux_8_7(), true), None);
        // The brief's server: BTF there, an old version number with backports.
        let notes = kernel_notes(&almalinux_8_7(), true);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains("predates Linux 5.12") && notes[0].contains("backports"));
        assert!(notes[1].contains("block_io_start") && notes[1].contains("not attributed"));
        let mut new = almalinux_8_7();
        new.kernel = "6.18.0-1-amd64".into();
        assert!(kernel_notes(&new, true).is_empty());
        new.kernel = "6.1.0".into();
        assert_eq!(kernel_notes(&new, true).len(), 1);
        // No eBPF asked for (diskstats, off): nothing to lack.
        assert!(kernel_notes(&no_btf, false).is_empty());
        assert_eq!(kernel_release("4.18.0-425.3.1.el8.x86_64"), Some((4, 18)));
        assert_eq!(kernel_release("6.18"), Some((6, 18)));
        assert_eq!(kernel_release(""), None);
    }
}
