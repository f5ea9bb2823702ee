//! Fuzz target: `iodig_fuzzing::properties_file` (see crates/fuzzing).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iodig_fuzzing::properties_file(data));
