//! Several threads, each on its own databases, doing random writes and
//! rollbacks checked against a copy of the data, under a budget too small
//! for all of them: caches evict each other's cold pages. Then every frame
//! must be back. One test: one install per process.

mod common;
use common::{assert_conserved, temp_dir, Db, Rng};
use pagealloc_sqlite::{install, Config};
use std::collections::BTreeMap;

const THREADS: u64 = 4;
const ROUNDS: u64 = 150;
const KEYS: u64 = 1500;

/// The table's rows, read back in key order.
fn rows(db: &mut Db) -> BTreeMap<i64, i64> {
    db.query("SELECT k, v FROM kv ORDER BY k").unwrap().into_iter().map(|r| (r[0], r[1])).collect()
}

/// One random transaction: writes applied to `model` only if committed.
fn transaction(db: &mut Db, model: &mut BTreeMap<i64, i64>, rng: &mut Rng) {
    let mut pending = model.clone();
    db.exec("BEGIN").unwrap();
    for _ in 0..1 + rng.below(20) {
        let k = rng.below(KEYS) as i64;
        let v = rng.below(1 << 30) as i64;
        if rng.below(4) == 0 {
            db.exec(&format!("DELETE FROM kv WHERE k = {k}")).unwrap();
            pending.remove(&k);
        } else {
            db.exec(&format!("INSERT OR REPLACE INTO kv VALUES({k}, {v}, randomblob(200))")).unwrap();
            pending.insert(k, v);
        }
    }
    if rng.below(3) == 0 {
        db.exec("ROLLBACK").unwrap();
    } else {
        db.exec("COMMIT").unwrap();
        *model = pending;
    }
}

fn worker(t: u64, dir: std::path::PathBuf) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ ((t + 1) * 0x1234_5678));
    // An on-disk database (purgeable cache) and a small in-memory one.
    let mut dbs =
        [Db::open(&dir.join(format!("t{t}.db")).display().to_string()).unwrap(), Db::open(":memory:").unwrap()];
    let mut models = [BTreeMap::new(), BTreeMap::new()];
    for db in &mut dbs {
        db.exec("CREATE TABLE kv(k INTEGER PRIMARY KEY, v INTEGER, pad BLOB)").unwrap();
    }
    // ~200 pages per on-disk database, in small transactions: dirty pages
    // stay pinned until commit, so a big one could pin the whole budget.
    for k in 0..KEYS as i64 {
        if k % 50 == 0 {
            dbs[0].exec("BEGIN").unwrap();
        }
        dbs[0].exec(&format!("INSERT INTO kv VALUES({k}, {k}, randomblob(500))")).unwrap();
        models[0].insert(k, k);
        if k % 50 == 49 {
            dbs[0].exec("COMMIT").unwrap();
        }
    }
    for round in 0..ROUNDS {
        // The in-memory database gets a tenth of the writes: its pages
        // cannot be evicted, so they must stay well inside the budget.
        let i = usize::from(rng.below(10) == 0);
        transaction(&mut dbs[i], &mut models[i], &mut rng);
        if round % 25 == 0 || round == ROUNDS - 1 {
            for (db, m) in dbs.iter_mut().zip(&models) {
                assert_eq!(&rows(db), m, "thread {t} round {round}");
            }
        }
    }
}

#[test]
fn threads_on_many_databases_share_one_budget() {
    // 2 MiB (512 frames) for four threads' databases of ~200 pages each.
    let g = install(&Config { arena_bytes: 32 << 20, budget_bytes: Some(2 << 20), ..Config::default() }).unwrap();
    let dir = temp_dir("threads");
    let hs: Vec<_> = (0..THREADS)
        .map(|t| {
            let d = dir.clone();
            std::thread::spawn(move || worker(t, d))
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let (caches, fetches, hits, _, evictions) = g.totals();
    eprintln!("{}", pagealloc_sqlite::stats_line());
    assert!(caches >= 2 * THREADS && fetches > 0 && hits > 0);
    assert!(evictions > 0, "the budget is below the databases' total size");
    assert_conserved(&g);
    std::fs::remove_dir_all(dir).unwrap();
}
