//! Operation sequences over the public API against a reference model (see
//! `crates/pagealloc/tests/fuzzops/mod.rs`, shared with the regression runner).
#![no_main]

#[path = "../../crates/pagealloc/tests/fuzzops/mod.rs"]
mod fuzzops;

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzops::run(data));
