//! Caps on the nodes of observed hosts, as the host's shell sets them, and how none outlives
//! the iodig that set it. The cap script throttles the node's cgroup on its disks and records
//! the cap on the host; the agent there holds a lease on the node's caps for as long as it
//! runs, and gives it up as it ends (its stdin closes when iodig ends, is killed, or the link
//! dies): from then on no cap can be set, and a recorded one is lifted. A lock on the host
//! orders the two, so a cap whose SSH command was in flight when iodig died is either refused
//! or lifted, never left. An agent killed before it could give up its lease leaves its cap to
//! the next agent for the node, which lifts it as it starts.

use super::ssh::quote;
use iodig_sysstat::cgroup::IoLimit;
use std::path::{Path, PathBuf};

/// The directory of records, leases and the lock on a host, under the SSH user's home (where
/// the agent's binary is too): writable without sudo, which only the limits need.
const DIR: &str = ".cache/iodig/caps";

/// A record's file name for `cgroup` (the lease's adds `.agent`).
fn key(cgroup: &str) -> String {
    cgroup.replace('/', "_")
}

/// The shell script that sets `limit` on each disk for the cgroup, in the hierarchy iodig's own
/// cgroups use (`iodig_sysstat::cgroup`: v1 blkio where mounted, else v2 with io), and prints
/// which mechanism ran. Root writes the limits directly, anyone else through password-less
/// sudo. Under the host's lock: a cap is set only while the node's agent holds its lease, and
/// is recorded (the cgroup, then its disks, a line each); an uncap removes the record.
pub fn script(cgroup: &str, disks: &[String], limit: IoLimit) -> String {
    let (bps, iops) = match limit {
        IoLimit::BytesPerSec(n) => (n.to_string(), "0".to_string()),
        IoLimit::IosPerSec(n) => ("0".to_string(), n.to_string()),
        IoLimit::None => ("0".to_string(), "0".to_string()),
    };
    // io.max takes "max" where blkio takes 0 for no limit.
    let max = |v: &str| {
        if v == "0" {
            "max".to_string()
        } else {
            v.to_string()
        }
    };
    let disks: Vec<String> = disks.iter().map(|d| quote(d)).collect();
    let (check, record) = match limit {
        IoLimit::None => (String::new(), "rm -f \"$caps/$key\"".to_string()),
        _ => (
            "a=$(cat \"$caps/$key.agent\" 2>/dev/null); \
             if [ -z \"$a\" ] || [ ! -d /proc/$a ]; then echo \"no iodig agent holds a lease on this node's caps in $caps (it has ended with the iodig that asked, or could not write there): not capped\" >&2; exit 1; fi; "
                .to_string(),
            format!(
                "printf '%s\\n' \"$cg\" {} > \"$caps/$key\" || echo \"warning: cannot record the cap in $caps: a killed iodig would leave it\" >&2",
                disks.join(" ")
            ),
        ),
    };
    format!(
        "if [ \"$(id -u)\" -eq 0 ]; then s=''; else s='sudo -n'; fi; \
         put() {{ echo \"$2\" | $s tee \"$1\" > /dev/null || {{ echo \"cannot write $2 to $1\" >&2; exit 1; }}; }}; \
         cg={cg}; key={key}; caps=\"$HOME/{DIR}\"; \
         if mkdir -p \"$caps\" 2>/dev/null && : 2>/dev/null >> \"$caps/.lock\"; then exec 9>> \"$caps/.lock\"; if command -v flock > /dev/null; then flock 9; fi; fi; \
         {check}\
         if [ -e /sys/fs/cgroup/blkio/cgroup.procs ]; then d=/sys/fs/cgroup/blkio$cg; how='cgroup v1 blkio throttling'; \
         else d=''; for r in /sys/fs/cgroup /sys/fs/cgroup/unified; do \
           if grep -qw io $r/cgroup.controllers 2>/dev/null; then d=$r$cg; how='cgroup v2 io.max'; break; fi; done; \
           [ -n \"$d\" ] || {{ echo 'neither cgroup v1 blkio nor cgroup v2 with the io controller here' >&2; exit 1; }}; fi; \
         [ -d \"$d\" ] || {{ rm -f \"$caps/$key\"; echo \"the node's cgroup $d is gone\" >&2; exit 1; }}; \
         for disk in {disks}; do \
           dev=$(cat /sys/block/$disk/dev) || exit 1; \
           if [ \"$how\" = 'cgroup v2 io.max' ]; then put $d/io.max \"$dev rbps={rmax} wbps={rmax} riops={imax} wiops={imax}\"; \
           else for dir in read write; do put $d/blkio.throttle.${{dir}}_bps_device \"$dev {bps}\"; put $d/blkio.throttle.${{dir}}_iops_device \"$dev {iops}\"; done; fi; \
         done; {record}; echo \"$how\"",
        cg = quote(cgroup),
        key = quote(&key(cgroup)),
        disks = disks.join(" "),
        rmax = max(&bps),
        imax = max(&iops),
    )
}

/// The agent's lease on the caps of its node's cgroup, taken when the agent starts. Dropping
/// it (the agent ending, however) gives it up under the host's lock, so no cap is set after,
/// then lifts a cap still recorded: one iodig did not live to lift. What it did is said on
/// stderr (the host's sshd log, or iodig's terminal while iodig lives).
pub struct Lease {
    cgroup: String,
    dir: PathBuf,
    /// The lease's file in `dir`: the agent's pid.
    file: PathBuf,
}

impl Lease {
    /// Takes the lease for `cgroup`; None without a home directory to keep it in (caps then
    /// fail with the reason, as the script finds no lease). A cap recorded with no live agent
    /// holding the lease (its agent was killed with SIGKILL, or its lift failed) is lifted
    /// first: until now it stayed on until this agent ended.
    pub fn take(cgroup: &str) -> Option<Lease> {
        let dir = Path::new(&std::env::var_os("HOME")?).join(DIR);
        std::fs::create_dir_all(&dir).ok()?;
        let file = dir.join(format!("{}.agent", key(cgroup)));
        let held = {
            let _lock = HostLock::take(&dir)?;
            let held = std::fs::read_to_string(&file).is_ok_and(|pid| is_alive(&pid));
            if !held {
                let _ = std::fs::remove_file(&file);
            }
            held
        };
        // Without the lease in place, a cap script run meanwhile sets nothing; the lift takes
        // the lock itself, so it runs between the two.
        if !held {
            report(lift_recorded(&dir, cgroup));
        }
        let _lock = HostLock::take(&dir)?;
        std::fs::write(&file, std::process::id().to_string()).ok()?;
        Some(Lease {
            cgroup: cgroup.to_string(),
            dir,
            file,
        })
    }
}

/// Whether a lease's pid names a running process (as the cap script checks it: /proc/PID).
fn is_alive(pid: &str) -> bool {
    let pid = pid.trim();
    !pid.is_empty()
        && pid.bytes().all(|b| b.is_ascii_digit())
        && Path::new("/proc").join(pid).is_dir()
}

/// A cap recorded in `dir` for `cgroup`, lifted: what was done, or why it could not be; None
/// when no cap was recorded.
fn lift_recorded(dir: &Path, cgroup: &str) -> Option<Result<String, String>> {
    let record = std::fs::read_to_string(dir.join(key(cgroup))).ok()?;
    let mut lines = record.lines();
    if lines.next() != Some(cgroup) {
        return None;
    }
    let disks: Vec<String> = lines.map(str::to_string).collect();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(script(cgroup, &disks, IoLimit::None))
        .output();
    Some(match out {
        Ok(o) if o.status.success() => Ok(format!(
            "lifted the cap iodig left on {} of cgroup {cgroup} ({})",
            disks.join(", "),
            String::from_utf8_lossy(&o.stdout).trim()
        )),
        Ok(o) => Err(format!(
            "cannot lift the cap iodig left on cgroup {cgroup}: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!(
            "cannot lift the cap iodig left on cgroup {cgroup}: cannot run sh: {e}"
        )),
    })
}

/// Says what a lift did on stderr (the host's sshd log, or iodig's terminal while iodig lives).
fn report(lift: Option<Result<String, String>>) {
    match lift {
        Some(Ok(done)) => iodig_model::eprintln_lossy!("iodig agent: {done}"),
        Some(Err(e)) => iodig_model::eprintln_lossy!("iodig agent: warning: {e}"),
        None => {}
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        {
            // A cap script holding the lock finishes (and records) first; one after it finds
            // no lease and sets nothing.
            let _lock = HostLock::take(&self.dir);
            let mine = std::fs::read_to_string(&self.file)
                .is_ok_and(|p| p.trim() == std::process::id().to_string());
            if mine {
                let _ = std::fs::remove_file(&self.file);
            }
        }
        report(lift_recorded(&self.dir, &self.cgroup));
    }
}

/// The host's lock on caps (`flock` on `.lock` in the records' directory), held until dropped
/// (closing the file releases it); the cap script takes the same one.
struct HostLock {
    _file: std::fs::File,
}

impl HostLock {
    fn take(dir: &Path) -> Option<HostLock> {
        use std::os::fd::AsRawFd;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(".lock"))
            .ok()?;
        // SAFETY: flock on a file descriptor this function owns; no memory is involved.
        (unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0)
            .then_some(HostLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cap_script_writes_each_disk_in_the_hierarchy_found_there() {
        let disks = vec!["vda".to_string(), "nvme0n1".to_string()];
        let s = script(
            "/iodig/cassandra-1",
            &disks,
            IoLimit::BytesPerSec(2_000_000),
        );
        assert!(s.contains("cg=/iodig/cassandra-1;"), "{s}");
        assert!(s.contains("for disk in vda nvme0n1;"), "{s}");
        assert!(
            s.contains("blkio.throttle.${dir}_bps_device \"$dev 2000000\""),
            "{s}"
        );
        assert!(
            s.contains("blkio.throttle.${dir}_iops_device \"$dev 0\""),
            "{s}"
        );
        assert!(
            s.contains("io.max \"$dev rbps=2000000 wbps=2000000 riops=max wiops=max\""),
            "{s}"
        );
        let s = script("/a b", &disks, IoLimit::None);
        assert!(s.contains("cg='/a b';"), "quoted: {s}");
        assert!(s.contains("rbps=max wbps=max riops=max wiops=max"), "{s}");
        let s = script("/x", &disks, IoLimit::IosPerSec(200));
        assert!(
            s.contains("riops=200 wiops=200") && s.contains("_iops_device \"$dev 200\""),
            "{s}"
        );
    }

    /// The script as a host's shell runs it, on this machine's real cgroups (root, as in CI),
    /// with the agent's lease: no cap without a lease; with it, the limit lands in the node's
    /// cgroup for its disk and is recorded; the uncap takes both away; a cap still on when the
    /// lease is given up is lifted, and none can be set after.
    #[test]
    fn a_cap_lands_in_a_real_cgroup_only_under_a_lease_and_goes_with_it() {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let euid = unsafe { libc::geteuid() };
        assert_eq!(euid, 0, "this test makes a cgroup: run it as root");
        let disk = iodig_iotrace::devices::resolve_path(Path::new("/var/tmp")).unwrap();
        let mut node = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let name = format!("test-cap-{}", std::process::id());
        let dir = iodig_sysstat::cgroup::place(&name, node.id()).unwrap();
        let cg = iodig_sysstat::cgroup::of_process(node.id()).unwrap();
        let run = |limit| {
            std::process::Command::new("sh")
                .arg("-c")
                .arg(script(&cg, std::slice::from_ref(&disk.name), limit))
                .output()
                .unwrap()
        };
        let limits = || {
            [
                "blkio.throttle.read_bps_device",
                "blkio.throttle.read_iops_device",
                "io.max",
            ]
            .iter()
            .map(|f| std::fs::read_to_string(dir.join(f)).unwrap_or_default())
            .collect::<String>()
            .lines()
            .filter(|l| !l.contains("rbps=max wbps=max riops=max wiops=max"))
            .collect::<Vec<_>>()
            .join("\n")
        };
        let records = Path::new(&std::env::var("HOME").unwrap()).join(DIR);
        let record = || std::fs::read_to_string(records.join(key(&cg))).ok();

        let without_lease = run(IoLimit::BytesPerSec(2_000_000));
        let limits_without_lease = limits();
        let lease = Lease::take(&cg).expect("a lease under $HOME");
        let capped = run(IoLimit::BytesPerSec(2_000_000));
        let (capped_limits, recorded) = (limits(), record());
        let freed = run(IoLimit::None);
        let (freed_limits, record_after_uncap) = (limits(), record());
        let capped_again = run(IoLimit::IosPerSec(100));
        let limits_before_end = limits();
        drop(lease);
        let (limits_after_end, record_after_end) = (limits(), record());
        let after_end = run(IoLimit::BytesPerSec(2_000_000));
        let limits_after_refusal = limits();
        let _ = node.kill();
        let _ = node.wait();
        let _ = iodig_sysstat::cgroup::remove(&dir);
        let gone = run(IoLimit::None);

        let refused = |o: &std::process::Output| {
            !o.status.success()
                && String::from_utf8_lossy(&o.stderr).contains("no iodig agent holds a lease")
        };
        assert!(refused(&without_lease), "{without_lease:?}");
        assert_eq!(limits_without_lease, "", "nothing set without a lease");
        assert!(capped.status.success(), "{capped:?}");
        let said = String::from_utf8_lossy(&capped.stdout);
        if said.contains("cgroup v1 blkio throttling") {
            assert_eq!(
                capped_limits.trim(),
                format!("{} 2000000", disk.dev),
                "{said}"
            );
        } else {
            assert!(said.contains("cgroup v2 io.max"), "{said}");
            assert!(capped_limits.contains(&format!("{} rbps=2000000 wbps=2000000", disk.dev)));
        }
        assert_eq!(recorded, Some(format!("{cg}\n{}\n", disk.name)), "recorded");
        assert!(freed.status.success(), "{freed:?}");
        assert_eq!(freed_limits, "", "the uncap frees the node");
        assert_eq!(record_after_uncap, None, "the uncap removes the record");
        assert!(capped_again.status.success(), "{capped_again:?}");
        assert!(limits_before_end.contains("100"), "{limits_before_end}");
        assert_eq!(limits_after_end, "", "the lease's end lifts the cap");
        assert_eq!(record_after_end, None, "and removes its record");
        assert!(refused(&after_end), "{after_end:?}");
        assert_eq!(limits_after_refusal, "", "no cap after the lease's end");
        assert!(!gone.status.success());
        assert!(
            String::from_utf8_lossy(&gone.stderr).contains("cgroup"),
            "the cgroup went with its node: {gone:?}"
        );
    }

    /// An agent killed with SIGKILL cannot give up its lease: the cap it let iodig set stays
    /// recorded. The next agent for the node finds the lease's pid dead and lifts that cap as
    /// it starts, and a cap refused meanwhile (no live lease) sets nothing.
    #[test]
    fn the_next_agent_lifts_a_cap_a_killed_agent_left() {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let euid = unsafe { libc::geteuid() };
        assert_eq!(euid, 0, "this test makes a cgroup: run it as root");
        let disk = iodig_iotrace::devices::resolve_path(Path::new("/var/tmp")).unwrap();
        let mut node = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let dir = iodig_sysstat::cgroup::place(
            &format!("test-cap-killed-{}", std::process::id()),
            node.id(),
        )
        .unwrap();
        let cg = iodig_sysstat::cgroup::of_process(node.id()).unwrap();
        let run = |limit| {
            std::process::Command::new("sh")
                .arg("-c")
                .arg(script(&cg, std::slice::from_ref(&disk.name), limit))
                .output()
                .unwrap()
        };
        let limit = || {
            std::fs::read_to_string(dir.join("blkio.throttle.write_bps_device"))
                .or_else(|_| std::fs::read_to_string(dir.join("io.max")))
                .unwrap_or_default()
                .lines()
                .filter(|l| !l.contains("rbps=max wbps=max riops=max wiops=max"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let records = Path::new(&std::env::var("HOME").unwrap()).join(DIR);
        let lease_file = records.join(format!("{}.agent", key(&cg)));

        // The first agent: a process that holds the lease, then dies without a word.
        let mut agent = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        std::fs::create_dir_all(&records).unwrap();
        std::fs::write(&lease_file, agent.id().to_string()).unwrap();
        let capped = run(IoLimit::BytesPerSec(3_000_000));
        let capped_limit = limit();
        let _ = agent.kill();
        let _ = agent.wait();
        let refused = run(IoLimit::BytesPerSec(1_000_000));
        let limit_after_death = limit();
        let next = Lease::take(&cg).expect("a lease under $HOME");
        let (limit_under_next, record_under_next) = (
            limit(),
            std::fs::read_to_string(records.join(key(&cg))).ok(),
        );
        let lease_holder = std::fs::read_to_string(&lease_file).unwrap_or_default();
        drop(next);
        let _ = node.kill();
        let _ = node.wait();
        let _ = iodig_sysstat::cgroup::remove(&dir);

        assert!(capped.status.success(), "{capped:?}");
        assert!(capped_limit.contains("3000000"), "{capped_limit}");
        assert!(
            !refused.status.success(),
            "no cap under a dead lease: {refused:?}"
        );
        assert!(
            limit_after_death.contains("3000000"),
            "the killed agent's cap is still on until an agent comes: {limit_after_death}"
        );
        assert_eq!(
            limit_under_next, "",
            "the next agent lifted it as it started"
        );
        assert_eq!(record_under_next, None, "and removed its record");
        assert_eq!(lease_holder, std::process::id().to_string());
    }
}
