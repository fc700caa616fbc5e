//! Fuzz target `fpm_config`: see `trapdetect::fuzzing::fpm_config`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| trapdetect::fuzzing::fpm_config(data));
