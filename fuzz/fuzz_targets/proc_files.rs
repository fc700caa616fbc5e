//! Fuzz target `proc_files`: see `trapdetect::fuzzing::proc_files`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| trapdetect::fuzzing::proc_files(data));
