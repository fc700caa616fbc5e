//! Fuzz target `sock_diag`: see `trapdetect::fuzzing::sock_diag`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| trapdetect::fuzzing::sock_diag(data));
