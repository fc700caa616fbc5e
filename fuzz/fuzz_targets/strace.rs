//! Fuzz target `strace`: see `trapdetect::fuzzing::strace`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| trapdetect::fuzzing::strace(data));
