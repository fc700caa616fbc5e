//! Fuzz target `load_results`: see `trapdetect::fuzzing::load_results`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| trapdetect::fuzzing::load_results(data));
