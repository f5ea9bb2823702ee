//! Compiles `src/bpf/iotrace.bpf.c` with clang and generates its libbpf-rs skeleton into OUT_DIR.

use libbpf_cargo::SkeletonBuilder;
use std::env;
use std::path::PathBuf;

const SRC: &str = "src/bpf/iotrace.bpf.c";

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    // -mcpu=v3: atomic fetch-and-add (BPF_FETCH, kernel 5.12+) gives the exact in-flight depth
    // at each issue; v3 also allows 32-bit jumps, which keeps the histogram code short.
    // No vmlinux.h and no kernel headers: src/bpf/kernel_types.h declares the few kernel types
    // the tracer reads, with preserve_access_index, so the build needs only clang.
    SkeletonBuilder::new()
        .source(SRC)
        .clang_args(["-I", "src/bpf", "-mcpu=v3", "-Wall", "-Wno-unused-function"])
        .build_and_generate(out.join("iotrace.skel.rs"))
        .unwrap_or_else(|e| {
            panic!("building {SRC} with clang failed (is clang >= 12 installed?): {e:#}")
        });
    for f in [
        "iotrace.bpf.c",
        "iotrace.h",
        "kernel_types.h",
        "handlers.bpf.h",
        "buckets.h",
    ] {
        println!("cargo:rerun-if-changed=src/bpf/{f}");
    }
}
