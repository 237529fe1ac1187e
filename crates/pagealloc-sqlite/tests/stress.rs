//! No page lost or corrupted, and no SQLITE_NOMEM below the hard cap: 8
//! threads on 16 databases (15 on disk, one in memory; page sizes 1, 4 and
//! 8 KiB) under a budget smaller than the pages they hold pinned at once
//! (so the group overdraws, and takes the overdraft back as they unpin),
//! with random point reads, transactions that commit or roll
//! back, savepoints rolled back to or released, range deletes that shrink
//! the file (auto_vacuum=FULL, or VACUUM: both end in xTruncate), tables
//! dropped and made again, and bulk inserts that grow the file back. Every
//! database is checked against a Rust model of its rows: each read, and all
//! rows with `PRAGMA integrity_check` now and then and at the end. The rows'
//! text is a function of their key and value, so a page whose bytes changed
//! under SQLite shows. The group's invariants are checked while the threads
//! run and at the end, and every frame must be back after the close.
//!
//! `PAGEALLOC_SQLITE_STRESS_OPS=N` sets the operations per thread (default
//! 250, a few seconds); CI runs the default, a longer soak sets it higher.
//! One test: one install per process.

mod common;
use common::{assert_conserved, temp_dir, Db, Rng};
use pagealloc_sqlite::{install, Config, Group};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

const THREADS: u64 = 8;
const DBS: usize = 16;
/// Keys of an on-disk database (the in-memory one has an eighth: its pages
/// are never evicted, so they must stay well inside the budget).
const KEYS: i64 = 600;
/// Rows of the side table a database creates and drops.
const SIDE_ROWS: i64 = 150;

/// The expected text of row (k, v) with repeat count r: `k:v;` r times.
const S_EXPR: &str = "replace(hex(zeroblob(r)), '00', k || ':' || v || ';')";

/// One database, its connection and the model of what it must hold.
struct Shard {
    db: Db,
    /// k -> (v, r) of table kv.
    rows: BTreeMap<i64, (i64, i64)>,
    /// Rows of table side, if it exists.
    side: Option<i64>,
    keys: i64,
    auto_vacuum: bool,
}

/// What the run did, to show the paths were exercised.
#[derive(Default)]
struct Counts {
    ops: AtomicU64,
    rollbacks: AtomicU64,
    savepoint_rollbacks: AtomicU64,
    shrinks: AtomicU64,
    drops: AtomicU64,
}

fn ops_per_thread() -> u64 {
    std::env::var("PAGEALLOC_SQLITE_STRESS_OPS").ok().and_then(|v| v.parse().ok()).unwrap_or(250)
}

/// Open database `i`: on disk, except the last, in memory.
fn open_shard(i: usize, dir: &std::path::Path) -> Shard {
    let in_memory = i == DBS - 1;
    let name = if in_memory { ":memory:".into() } else { dir.join(format!("s{i}.db")).display().to_string() };
    let mut db = Db::open(&name).unwrap();
    // One database of 8 KiB pages (two frames each) and three of 1 KiB:
    // more 8 KiB ones would keep the group's oldest page a size no other
    // cache can take over in place, and that path would go cold.
    let page_size = match i {
        4 => 8192,
        2 | 7 | 12 => 1024,
        _ => 4096,
    };
    let auto_vacuum = i.is_multiple_of(2);
    // Two caches with a small soft limit: they recycle their own pages, and
    // refuse createFlag 1 once nine tenths are pinned, so SQLite spills.
    let cache_size = if i == 5 || i == 8 { 30 } else { 4000 };
    db.exec(&format!(
        "PRAGMA page_size={page_size}; PRAGMA auto_vacuum={}; PRAGMA synchronous=OFF;
         PRAGMA cache_size={cache_size}; PRAGMA cache_spill=16;
         CREATE TABLE kv(k INTEGER PRIMARY KEY, v INTEGER, r INTEGER, s TEXT);",
        if auto_vacuum { "FULL" } else { "NONE" }
    ))
    .unwrap();
    // A 1 KiB page takes a frame as a 4 KiB one does: a quarter of the keys.
    let keys = if in_memory {
        KEYS / 8
    } else if page_size == 1024 {
        KEYS / 4
    } else {
        KEYS
    };
    let mut s = Shard { db, rows: BTreeMap::new(), side: None, keys, auto_vacuum };
    let mut rng = Rng(0x5eed ^ ((i as u64 + 1) * 0x9e37_79b9));
    insert_range(&mut s, &mut rng, 0, keys);
    s
}

/// Rows of table kv, as the model holds them.
type Rows = BTreeMap<i64, (i64, i64)>;

/// Insert or replace keys `lo..hi` in transactions of 50 (committed).
fn insert_range(s: &mut Shard, rng: &mut Rng, lo: i64, hi: i64) {
    let mut k = lo;
    while k < hi {
        let mut pending = s.rows.clone();
        s.db.exec("BEGIN").unwrap();
        for k in k..(k + 50).min(hi) {
            set(&mut s.db, &mut pending, rng, k);
        }
        s.db.exec("COMMIT").unwrap();
        s.rows = pending;
        k += 50;
    }
}

/// Write row k with a random value in SQL and in `rows`.
fn set(db: &mut Db, rows: &mut Rows, rng: &mut Rng, k: i64) {
    let (v, r) = (rng.below(1 << 30) as i64, 10 + rng.below(50) as i64);
    db.exec(&format!("INSERT OR REPLACE INTO kv(k, v, r, s) VALUES({k}, {v}, {r}, NULL)")).unwrap();
    db.exec(&format!("UPDATE kv SET s = {S_EXPR} WHERE k = {k}")).unwrap();
    rows.insert(k, (v, r));
}

/// 1..=n random writes (three in four set a row, one deletes it).
fn writes(s: &mut Shard, rows: &mut Rows, rng: &mut Rng, n: u64) {
    for _ in 0..1 + rng.below(n) {
        let k = rng.below(s.keys as u64) as i64;
        if rng.below(4) == 0 {
            s.db.exec(&format!("DELETE FROM kv WHERE k = {k}")).unwrap();
            rows.remove(&k);
        } else {
            set(&mut s.db, rows, rng, k);
        }
    }
}

/// A transaction of random writes, committed or (one in three) rolled back.
fn transaction(s: &mut Shard, rng: &mut Rng, c: &Counts) {
    let mut pending = s.rows.clone();
    s.db.exec("BEGIN").unwrap();
    writes(s, &mut pending, rng, 20);
    end(s, pending, rng, c);
}

/// COMMIT (the model takes `pending`) or, one in three, ROLLBACK.
fn end(s: &mut Shard, pending: Rows, rng: &mut Rng, c: &Counts) {
    if rng.below(3) == 0 {
        s.db.exec("ROLLBACK").unwrap();
        c.rollbacks.fetch_add(1, Relaxed);
    } else {
        s.db.exec("COMMIT").unwrap();
        s.rows = pending;
    }
}

/// Writes, a savepoint, more writes rolled back to it or released, more
/// writes, then commit or rollback.
fn savepoints(s: &mut Shard, rng: &mut Rng, c: &Counts) {
    let mut pending = s.rows.clone();
    s.db.exec("BEGIN").unwrap();
    writes(s, &mut pending, rng, 10);
    s.db.exec("SAVEPOINT sp").unwrap();
    let before = pending.clone();
    writes(s, &mut pending, rng, 20);
    if rng.below(2) == 0 {
        s.db.exec("ROLLBACK TO sp; RELEASE sp").unwrap();
        pending = before;
        c.savepoint_rollbacks.fetch_add(1, Relaxed);
    } else {
        s.db.exec("RELEASE sp").unwrap();
    }
    writes(s, &mut pending, rng, 10);
    end(s, pending, rng, c);
}

/// Delete a range of a fifth to a half of the keys and shrink the file
/// (auto_vacuum=FULL at commit, else VACUUM): SQLite truncates the cache
/// past the new end (xTruncate). Then refill part of the range, so the
/// file grows back.
fn truncate(s: &mut Shard, rng: &mut Rng, c: &Counts) {
    let before = s.db.one("PRAGMA page_count");
    let span = s.keys / 5 + rng.below((s.keys / 3) as u64) as i64;
    let lo = rng.below((s.keys - span) as u64) as i64;
    s.db.exec(&format!("DELETE FROM kv WHERE k BETWEEN {lo} AND {}", lo + span)).unwrap();
    s.rows.retain(|&k, _| k < lo || k > lo + span);
    if !s.auto_vacuum {
        s.db.exec("VACUUM").unwrap();
    }
    if s.db.one("PRAGMA page_count") < before {
        c.shrinks.fetch_add(1, Relaxed);
    }
    let refill = rng.below(span as u64) as i64;
    insert_range(s, rng, lo, lo + refill);
}

/// Drop table side if it exists, else create and fill it.
fn side(s: &mut Shard, c: &Counts) {
    if s.side.take().is_some() {
        s.db.exec("DROP TABLE side").unwrap();
        c.drops.fetch_add(1, Relaxed);
    } else {
        s.db.exec(&format!(
            "CREATE TABLE side(x BLOB);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {SIDE_ROWS})
             INSERT INTO side SELECT randomblob(300) FROM n;"
        ))
        .unwrap();
        s.side = Some(SIDE_ROWS);
    }
}

/// Point reads of random keys against the model.
fn reads(s: &mut Shard, rng: &mut Rng, who: &str) {
    for _ in 0..8 {
        let k = rng.below(s.keys as u64) as i64;
        let got = s.db.query(&format!("SELECT v, r, s = {S_EXPR} FROM kv WHERE k = {k}")).unwrap();
        let want: Vec<Vec<i64>> = s.rows.get(&k).map(|&(v, r)| vec![v, r, 1]).into_iter().collect();
        assert_eq!(got, want, "{who}: key {k}");
    }
}

/// Every row against the model, the side table, and SQLite's own check.
fn full_check(s: &mut Shard, who: &str) {
    let got = s.db.query(&format!("SELECT k, v, r, s = {S_EXPR} FROM kv ORDER BY k")).unwrap();
    let want: Vec<Vec<i64>> = s.rows.iter().map(|(&k, &(v, r))| vec![k, v, r, 1]).collect();
    assert!(got == want, "{who}: {} rows, model {}; first difference {:?}", got.len(), want.len(), {
        got.iter().zip(&want).find(|(a, b)| a != b)
    });
    let side = s.db.query("SELECT count(*) FROM sqlite_schema WHERE name = 'side'").unwrap()[0][0];
    assert_eq!(side == 1, s.side.is_some(), "{who}: table side");
    if let Some(n) = s.side {
        assert_eq!(s.db.one("SELECT count(*) FROM side"), n, "{who}: side rows");
    }
    let ok = s.db.query("PRAGMA integrity_check").unwrap();
    assert!(ok.is_empty() || ok.len() == 1, "{who}: integrity_check");
    assert_eq!(s.db.one("SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'"), 1, "{who}");
}

/// One thread: random operations on random databases. Every statement
/// must succeed (`unwrap`): the budget is below the pages the threads hold
/// pinned together (shrinks and table fills pin theirs until they end,
/// and SQLite cannot spill some of them, e.g. during auto-vacuum's
/// commit), so only the overdraft serves them.
fn worker(t: u64, shards: &[Mutex<Shard>], g: &Group, c: &Counts) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ ((t + 1) * 0x1234_5678_9abc));
    for op in 0..ops_per_thread() {
        let i = rng.below(DBS as u64) as usize;
        let mut s = shards[i].lock().unwrap_or_else(|_| panic!("db {i}: another thread failed on it"));
        let who = format!("thread {t} op {op} db {i}");
        match rng.below(100) {
            0..30 => reads(&mut s, &mut rng, &who),
            30..55 => transaction(&mut s, &mut rng, c),
            55..72 => savepoints(&mut s, &mut rng, c),
            72..82 => truncate(&mut s, &mut rng, c),
            82..90 => side(&mut s, c),
            _ => full_check(&mut s, &who),
        }
        drop(s);
        c.ops.fetch_add(1, Relaxed);
        if op % 16 == 0 {
            g.check_invariants().unwrap_or_else(|e| panic!("{who}: {e}"));
        }
    }
}

#[test]
fn eight_threads_sixteen_databases_no_page_lost() {
    // 256 KiB (about 58 pages of 4 KiB): 16 databases of about 80 pages
    // each (the in-memory one about 10, which cannot be evicted), and
    // their side tables, hold about 25 times that, and 8 threads' pinned
    // pages (a transaction's dirty pages stay pinned until spilled, and
    // SQLite spills once its cache holds 16: cache_spill) exceed it.
    // Each connection's cache_size is large, so only the shared budget
    // limits it. The hard cap, the arena, is never reached.
    let g = install(&Config { arena_bytes: 16 << 20, budget_bytes: Some(256 << 10), ..Config::default() }).unwrap();
    let dir = temp_dir("stress");
    let shards: Vec<Mutex<Shard>> = (0..DBS).map(|i| Mutex::new(open_shard(i, &dir))).collect();
    let c = Counts::default();
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let (shards, g, c) = (&shards, &g, &c);
            scope.spawn(move || worker(t, shards, g, c));
        }
    });
    // Every page unpinned: the overdraft was taken back as they unpinned.
    let over = g.overdraft();
    assert_eq!(over.current, 0, "{over:?}");
    assert!(g.charged_bytes() <= g.budget_bytes());
    for (i, s) in shards.iter().enumerate() {
        full_check(&mut s.lock().unwrap(), &format!("end db {i}"));
    }
    g.check_invariants().unwrap();
    let (caches, fetches, hits, misses, evictions) = g.totals();
    let (hard, cheap_refused) = g.create_counts();
    eprintln!(
        "{} hard {hard} cheap_refused {cheap_refused}; ops {} rollbacks {} savepoint rollbacks {} shrinks {} drops {}",
        pagealloc_sqlite::stats_line(),
        c.ops.load(Relaxed),
        c.rollbacks.load(Relaxed),
        c.savepoint_rollbacks.load(Relaxed),
        c.shrinks.load(Relaxed),
        c.drops.load(Relaxed)
    );
    assert!(caches >= DBS as u64 && hits > 0 && misses > 0 && fetches == hits + misses);
    assert!(evictions > 0, "the budget is below the databases' data: pages must be evicted");
    assert!(
        hard > 0 && cheap_refused > 0,
        "createFlag 1 must be refused and 2 used: hard {hard} cheap {cheap_refused}"
    );
    assert!(over.times > 0 && over.peak > 0, "the pinned pages must overdraw the budget: {over:?}");
    assert_eq!(c.ops.load(Relaxed), THREADS * ops_per_thread());
    assert!(c.rollbacks.load(Relaxed) > 0 && c.savepoint_rollbacks.load(Relaxed) > 0);
    assert!(c.shrinks.load(Relaxed) > 0 && c.drops.load(Relaxed) > 0, "files must shrink and tables drop");
    drop(shards);
    assert_conserved(&g);
    std::fs::remove_dir_all(dir).unwrap();
}
