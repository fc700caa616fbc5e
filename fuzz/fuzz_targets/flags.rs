//! Fuzz target `flags`: see `trapdetect::fuzzing::flags`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| trapdetect::fuzzing::flags(data));
