//! Build script of the `iodig` binary: records the git revision it was built from, so run.json
//! says which iodig measured (`tool.revision`). Outside a git checkout the revision is absent.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    // Rebuild when HEAD moves (a commit, a checkout), not on every edit: the revision is the
    // commit, and "-modified" says the tree differed from it when the binary was built.
    if let Some(head) = git(&["rev-parse", "--git-path", "HEAD"]) {
        println!("cargo:rerun-if-changed={head}");
    }
    if let Some(reference) = git(&["symbolic-ref", "-q", "HEAD"]) {
        if let Some(path) = git(&["rev-parse", "--git-path", &reference]) {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    if let Some(packed) = git(&["rev-parse", "--git-path", "packed-refs"]) {
        println!("cargo:rerun-if-changed={packed}");
    }
    if let Some(rev) = git(&["rev-parse", "--short=12", "HEAD"]) {
        let modified = git(&["status", "--porcelain", "--untracked-files=no"]).is_some();
        let suffix = if modified { "-modified" } else { "" };
        println!("cargo:rustc-env=IODIG_GIT_REVISION={rev}{suffix}");
    }
}
