//! Every input kept under `fuzz/regressions/<target>/` (ones that once crashed a target) and
//! the seed corpus under `fuzz/seeds/<target>/` goes through its target again: no panic.

use std::path::Path;

#[test]
fn kept_inputs_no_longer_panic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut replayed = 0;
    for (name, target) in iodig_fuzzing::TARGETS {
        for folder in ["regressions", "seeds"] {
            let dir = root.join(folder).join(name);
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries {
                let path = entry.unwrap().path();
                let data = std::fs::read(&path).unwrap();
                let outcome = std::panic::catch_unwind(|| target(&data));
                assert!(outcome.is_ok(), "{name} panics on {}", path.display());
                replayed += 1;
            }
        }
    }
    // The seeds are in the repository: an empty replay means the folders moved.
    assert!(
        replayed >= iodig_fuzzing::TARGETS.len(),
        "{replayed} inputs replayed"
    );
}

#[test]
fn the_seed_run_reads_and_reports() {
    // The template the run_directory target mutates must itself be a valid run.
    let doc = iodig_model::reading::read_run_doc(&iodig_fuzzing::seed_run()).unwrap();
    assert_eq!(doc.steps.len(), 2);
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("run");
    std::process::Command::new("cp")
        .args(["-r"])
        .arg(iodig_fuzzing::seed_run())
        .arg(&copy)
        .status()
        .unwrap();
    let out = iodig_report::write_report(&copy).unwrap();
    assert!(!out.files.is_empty());
}
