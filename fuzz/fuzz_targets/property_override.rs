//! Fuzz target: `iodig_fuzzing::property_override` (see crates/fuzzing).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iodig_fuzzing::property_override(data));
