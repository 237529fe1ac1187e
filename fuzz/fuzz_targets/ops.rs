//! Operation sequences over the public API against the reference model (see
//! `crates/pagealloc/tests/refmodel/`, shared with the regression runner and
//! the property tests).
#![no_main]

#[path = "../../crates/pagealloc/tests/refmodel/mod.rs"]
mod refmodel;

libfuzzer_sys::fuzz_target!(|data: &[u8]| refmodel::run(data));
