//! Fuzz target `proc_net_tcp`: see `trapdetect::fuzzing::proc_net_tcp`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| trapdetect::fuzzing::proc_net_tcp(data));
