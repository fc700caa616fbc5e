//! Fuzz target `http_response`: see `trapdetect::fuzzing::http_response`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| trapdetect::fuzzing::http_response(data));
