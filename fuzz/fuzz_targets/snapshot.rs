#![no_main]

// The body lives in the library (gpu_labeler::fuzzing::snapshot) so that tests/fuzz_regressions.rs
// replays the corpus and every crash input on stable Rust.
libfuzzer_sys::fuzz_target!(|data: &[u8]| gpu_labeler::fuzzing::snapshot(data));
