//! Replays the fuzzer's kept inputs (`fuzz/regressions/`: minimised crashes and
//! seed inputs) through the same decoder and reference model the fuzz target
//! uses, plus a batch of deterministic pseudo-random inputs, so the model's
//! checks run under `cargo test` without nightly.

mod fuzzops;

use std::path::PathBuf;

fn regressions_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions")
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
        fuzzops::run(&data);
    }
}

#[test]
fn pseudo_random_inputs_match_the_model() {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for i in 0..48 {
        let len = 64 + (i * 97) % 1500;
        let data: Vec<u8> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        fuzzops::run(&data);
    }
}
