//! Compiles `src/bpf/pauses.bpf.c` with clang and generates its libbpf-rs skeleton into OUT_DIR.

use libbpf_cargo::SkeletonBuilder;
use std::env;
use std::path::PathBuf;

const SRC: &str = "src/bpf/pauses.bpf.c";

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    // No kernel type is read: the programs see only their own maps and the uprobe's
    // registers, at an offset userspace sets, so the build needs only clang.
    SkeletonBuilder::new()
        .source(SRC)
        .clang_args(["-Wall", "-Wno-unused-function", "-Wno-unused-parameter"])
        .build_and_generate(out.join("pauses.skel.rs"))
        .unwrap_or_else(|e| {
            panic!("building {SRC} with clang failed (is clang >= 12 installed?): {e:#}")
        });
    println!("cargo:rerun-if-changed={SRC}");
}
