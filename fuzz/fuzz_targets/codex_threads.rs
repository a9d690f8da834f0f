#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agentteam::fuzzing::codex_threads(data));
