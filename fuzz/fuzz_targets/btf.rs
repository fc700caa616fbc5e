//! Fuzz target `btf`: see `trapdetect::fuzzing::btf`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| trapdetect::fuzzing::btf(data));
