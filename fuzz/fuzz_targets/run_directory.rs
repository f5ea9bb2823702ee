//! Fuzz target: `iodig_fuzzing::run_directory` (see crates/fuzzing).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iodig_fuzzing::run_directory(data));
