//! Replays the fuzzer's kept inputs (`fuzz/regressions/`: minimised crashes and
//! seed inputs) through the same decoder and reference model (`tests/refmodel/`) the fuzz target
//! uses, plus a batch of deterministic pseudo-random inputs, so the model's
//! checks run under `cargo test` without nightly.

use crate::refmodel;

use std::path::PathBuf;

fn regressions_dir() -> PathBuf {
    // FUZZOPS_DIR replays another directory (a fuzzer's artifacts, say).
    std::env::var_os("FUZZOPS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions"))
}

#[test]
fn kept_fuzz_inputs_replay_clean() {
    let mut files: Vec<_> = std::fs::read_dir(regressions_dir())
        .expect("fuzz/regressions exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.extension().is_none_or(|x| x != "md"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no kept inputs in {}", regressions_dir().display());
    for f in files {
        let data = std::fs::read(&f).unwrap();
        eprintln!("replaying {}", f.display());
        refmodel::run(&data);
    }
}

#[test]
fn pseudo_random_inputs_match_the_model() {
    // FUZZOPS_RANDOM=N runs N inputs instead of 48 (a longer soak of the model).
    let n = std::env::var("FUZZOPS_RANDOM").ok().and_then(|v| v.parse().ok()).unwrap_or(48);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for i in 0..n {
        let len = 64 + (i * 97) % 1500;
        let data: Vec<u8> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        refmodel::run(&data);
    }
}

/// The old per-CPU design (`Config::pcp_migratetype_cache(true)`) used to free a
/// drained page onto the list of the type cached at free time even when the
/// pageblock had become HighAtomic meanwhile, leaving an Unmovable page on a
/// list inside a HighAtomic block. Drains now use the block's type whenever it
/// is not a pcp type (pcp.rs `free_coalesced`).
#[cfg(feature = "seed-variants")]
#[test]
fn seed2_cached_migratetype_keeps_hygiene() {
    let f = regressions_dir().join("ignored/crash-seed2-cached-migratetype-hygiene");
    refmodel::run_with(&std::fs::read(f).unwrap(), |c| c.pcp_migratetype_cache(true));
}
