#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agentteam::fuzzing::transcripts(data));
