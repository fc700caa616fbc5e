//! Fuzz target `mountinfo`: see `trapdetect::fuzzing::mountinfo`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| trapdetect::fuzzing::mountinfo(data));
