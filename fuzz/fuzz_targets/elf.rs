//! Fuzz target `elf`: see `trapdetect::fuzzing::elf`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| trapdetect::fuzzing::elf(data));
