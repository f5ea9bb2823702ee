//! Fuzz target: `iodig_fuzzing::experiment_file` (see crates/fuzzing).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iodig_fuzzing::experiment_file(data));
