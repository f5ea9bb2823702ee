//! The faulty disks iodig mounts for slow, failing and full devices: what the kernel traced on
//! them, and that nothing of them outlives a run.

use serde_json::Value;
use std::path::Path;

/// The loop device of a faulty disk in a step's trace.
pub fn device_of(trace: &Value) -> &Value {
    trace["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"].as_str().unwrap_or_default().starts_with("loop"))
        .unwrap_or_else(|| panic!("the trace covers the loop device: {trace}"))
}

/// Nothing of this run's disk outlives it: no mount under its `--out` (the data directory and
/// the FUSE layer beside it), no loop device over a file there. Only this run's paths are
/// looked at: another test's disk may be up at the same time.
pub fn assert_nothing_left(out: &Path) {
    let out = std::fs::canonicalize(out).unwrap().display().to_string();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let left: Vec<&str> = mounts.lines().filter(|l| l.contains(&out)).collect();
    assert!(left.is_empty(), "left mounted: {left:?}");
    for e in std::fs::read_dir("/sys/block").unwrap().flatten() {
        let backing =
            std::fs::read_to_string(e.path().join("loop/backing_file")).unwrap_or_default();
        assert!(
            !backing.contains(&out),
            "{:?} still backed by {backing}",
            e.file_name()
        );
    }
    let states: Vec<_> = walk_names(Path::new(&out))
        .into_iter()
        .filter(|n| n.starts_with(".iodig-faultdisk-"))
        .collect();
    assert!(states.is_empty(), "state directories left: {states:?}");
}

/// Every file and directory name under `dir`, recursively.
fn walk_names(dir: &Path) -> Vec<String> {
    let mut names = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        names.push(e.file_name().to_string_lossy().into_owned());
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            names.extend(walk_names(&e.path()));
        }
    }
    names
}
