//! The cost of an order-0 alloc+free pair through the Rust API and through the
//! C API, on the same allocator settings (64 MiB, no backing memory), in
//! alternating rounds:
//!
//! - `rust`: `PageAllocator::alloc_pages` / `free_pages` (inlined fast path);
//! - `rust-calls`: the same through `#[inline(never)]` functions called by
//!   pointer (what a call boundary alone costs the Rust API);
//! - `ffi`: `pagealloc_alloc_pages` / `pagealloc_free_pages` called from Rust
//!   through `extern "C"` function pointers (the C ABI, no inlining), same
//!   process;
//! - `c`: `examples/c/pair_cost.c`, built with the system `cc` against the
//!   staticlib of this profile and run as its own process.
//!
//! ```sh
//! cargo run --release -p pagealloc-capi --example pair_cost [N] [ROUNDS] [all|rust|rust-calls|ffi]
//! ```
//!
//! Each round takes, for each of the three, the best of 10 runs of N pairs
//! (default 200000: short runs, so that on a loaded machine some run
//! undisturbed); the rounds alternate the three.
//!
//! Then will-it-scale's page_fault1 loop on one thread, through each API on
//! an allocator of its own with anonymous backing: 32768 order-0 pages taken
//! one call at a time, each one's address looked up and a byte written to it,
//! then all of them freed in one bulk call; ns per page (best of the rounds),
//! as `examples/c/page_fault1.c` does it.
//!
//! `rust`, `rust-calls`, `ffi`, `rust-pf1` or `ffi-pf1` runs only that loop
//! (no C program; the page_fault1 ones for N / 32768 + 1 passes), for
//! instruction counts under `valgrind --tool=callgrind`.
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use pagealloc::{Backing, Config, Gfp, PageAllocator, Pfn};
use pagealloc_c::{
    pagealloc as Handle, pagealloc_alloc_pages, pagealloc_config, pagealloc_config_default, pagealloc_create,
    pagealloc_destroy, pagealloc_free_pages, pagealloc_status, PAGEALLOC_BACKING_NONE,
};
use pagealloc_c::{pagealloc_alloc_pages_bulk, pagealloc_free_pages_bulk_slots, PAGEALLOC_HOLE};
use pagealloc_c::{pagealloc_free_pages_bulk, pagealloc_page_address, PAGEALLOC_BACKING_ANONYMOUS, PAGEALLOC_GFP_USER};

type AllocFn = unsafe extern "C" fn(*const Handle, u32, u32, *mut u64) -> pagealloc_status;
type FreeFn = unsafe extern "C" fn(*const Handle, u64, u32) -> pagealloc_status;

fn rust_pairs(a: &PageAllocator, n: u64) -> f64 {
    let t = Instant::now();
    for _ in 0..n {
        let p = a.alloc_pages(black_box(Gfp::KERNEL), 0).expect("alloc");
        a.free_pages(black_box(p), 0).expect("free");
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

#[inline(never)]
fn alloc_call(a: &PageAllocator, g: Gfp) -> Pfn {
    a.alloc_pages(g, 0).expect("alloc")
}

#[inline(never)]
fn free_call(a: &PageAllocator, p: Pfn) {
    a.free_pages(p, 0).expect("free")
}

/// The Rust API through calls the compiler may not inline: what is left of
/// the C API's extra cost is its own work (checks, status, handle).
fn rust_call_pairs(a: &PageAllocator, n: u64) -> f64 {
    let alloc: fn(&PageAllocator, Gfp) -> Pfn = black_box(alloc_call);
    let free: fn(&PageAllocator, Pfn) = black_box(free_call);
    let t = Instant::now();
    for _ in 0..n {
        free(a, alloc(a, Gfp::KERNEL));
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

fn ffi_pairs(h: *const Handle, n: u64) -> f64 {
    // Through opaque function pointers, so nothing is inlined across the ABI.
    let alloc: AllocFn = black_box(pagealloc_alloc_pages);
    let free: FreeFn = black_box(pagealloc_free_pages);
    let t = Instant::now();
    for _ in 0..n {
        let mut p = 0u64;
        // SAFETY: h is a live handle; p is a local the call may write.
        let s = unsafe { alloc(h, 0, 0, &mut p) };
        assert_eq!(s, pagealloc_status::PAGEALLOC_OK);
        // SAFETY: as above.
        let s = unsafe { free(h, p, 0) };
        assert_eq!(s, pagealloc_status::PAGEALLOC_OK);
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

/// Pages a page_fault1 pass takes (its MEMSIZE, 128 MiB, in 4 KiB pages).
const PF1_PAGES: usize = 32768;

/// One page_fault1 pass through the Rust API: ns per page.
fn rust_pf1(a: &PageAllocator, pfns: &mut Vec<Pfn>) -> f64 {
    let t = Instant::now();
    pfns.clear();
    for _ in 0..PF1_PAGES {
        let p = a.alloc_pages(black_box(Gfp::USER), 0).expect("alloc");
        let m = a.page_address(p).expect("a backed arena");
        // SAFETY: the page is ours, and backed.
        unsafe { m.as_ptr().write_volatile(1) };
        pfns.push(p);
    }
    a.free_pages_bulk(pfns).expect("bulk free");
    t.elapsed().as_nanos() as f64 / PF1_PAGES as f64
}

/// The same pass through the C API (as `examples/c/page_fault1.c`).
fn ffi_pf1(h: *const Handle, pfns: &mut [u64]) -> f64 {
    let alloc: AllocFn = black_box(pagealloc_alloc_pages);
    let t = Instant::now();
    for slot in pfns.iter_mut() {
        let mut addr = std::ptr::null_mut();
        // SAFETY: h is a live handle; slot and addr are writable.
        let s = unsafe { alloc(h, PAGEALLOC_GFP_USER, 0, slot) };
        assert_eq!(s, pagealloc_status::PAGEALLOC_OK);
        // SAFETY: as above.
        let s = unsafe { pagealloc_page_address(h, *slot, &mut addr) };
        assert_eq!(s, pagealloc_status::PAGEALLOC_OK);
        // SAFETY: the page is ours, and backed.
        unsafe { addr.cast::<u8>().write_volatile(1) };
    }
    let mut rejected = 0;
    // SAFETY: pfns holds pfns.len() pages just allocated; rejected is writable.
    let s = unsafe { pagealloc_free_pages_bulk(h, pfns.as_ptr(), pfns.len(), &mut rejected, std::ptr::null_mut()) };
    assert!(s == pagealloc_status::PAGEALLOC_OK && rejected == 0);
    t.elapsed().as_nanos() as f64 / PF1_PAGES as f64
}

/// The page_fault1 allocators: 128 MiB for the pass plus room for the
/// watermarks and per-CPU lists, anonymous backing (as page_fault1.c).
fn pf1_allocators() -> (PageAllocator, *mut Handle) {
    let a = PageAllocator::new(Config::new().arena_bytes(384 << 20).backing(Backing::Anonymous)).expect("allocator");
    let mut cfg = std::mem::MaybeUninit::<pagealloc_config>::uninit();
    // SAFETY: cfg is writable.
    assert_eq!(unsafe { pagealloc_config_default(cfg.as_mut_ptr()) }, pagealloc_status::PAGEALLOC_OK);
    // SAFETY: initialised just above.
    let mut cfg = unsafe { cfg.assume_init() };
    cfg.arena_bytes = 384 << 20;
    cfg.backing = PAGEALLOC_BACKING_ANONYMOUS;
    let mut h: *mut Handle = std::ptr::null_mut();
    // SAFETY: valid config and out pointer.
    assert_eq!(unsafe { pagealloc_create(&cfg, &mut h) }, pagealloc_status::PAGEALLOC_OK);
    (a, h)
}

/// target/<profile>: this example lives in target/<profile>/examples.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent().and_then(Path::parent).expect("target/<profile>/examples/<exe>").to_path_buf()
}

/// Build examples/c/pair_cost.c against this profile's staticlib.
fn build_c() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = profile_dir();
    // `cargo build --example` leaves the library's artifacts in deps/: the newer.
    let lib = [dir.join("libpagealloc_c.a"), dir.join("deps/libpagealloc_c.a")]
        .into_iter()
        .filter_map(|p| Some((p.metadata().ok()?.modified().ok()?, p)))
        .max()
        .map_or_else(|| dir.join("libpagealloc_c.a"), |(_, p)| p);
    let out = dir.join("examples").join("pair_cost_c");
    let st = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-std=c11", "-O2", "-I"])
        .arg(root.join("include"))
        .arg(root.join("examples/c/pair_cost.c"))
        .arg(&lib)
        .args(["-lgcc_s", "-lutil", "-lrt", "-lpthread", "-lm", "-ldl", "-lc", "-o"])
        .arg(&out)
        .status();
    match st {
        Ok(s) if s.success() => Some(out),
        _ => {
            eprintln!("pair_cost: could not build the C program (is {} there?); C figures skipped", lib.display());
            None
        }
    }
}

/// ns per page of `bulk` pages filled and freed through the Rust array form.
fn rust_bulk(a: &PageAllocator, bulk: usize, n: u64) -> f64 {
    let mut slots = vec![None; bulk];
    let t = Instant::now();
    for _ in 0..n {
        assert_eq!(a.alloc_pages_bulk(Gfp::KERNEL, black_box(&mut slots)), bulk);
        a.free_pages_bulk_slots(black_box(&mut slots)).expect("bulk free");
    }
    t.elapsed().as_nanos() as f64 / (n * bulk as u64) as f64
}

/// The same through the C API's slot arrays (`PAGEALLOC_HOLE` for empty).
fn ffi_bulk(h: *const Handle, bulk: usize, n: u64) -> f64 {
    let mut slots = vec![PAGEALLOC_HOLE; bulk];
    let t = Instant::now();
    for _ in 0..n {
        let mut got = 0;
        // SAFETY: h is a live handle; slots has `bulk` elements; got is writable.
        let s = unsafe { pagealloc_alloc_pages_bulk(h, 0, slots.as_mut_ptr(), bulk, &mut got) };
        assert!(s == pagealloc_status::PAGEALLOC_OK && got == bulk);
        // SAFETY: as above; the counts are optional.
        let s = unsafe {
            pagealloc_free_pages_bulk_slots(h, slots.as_mut_ptr(), bulk, std::ptr::null_mut(), std::ptr::null_mut())
        };
        assert_eq!(s, pagealloc_status::PAGEALLOC_OK);
    }
    t.elapsed().as_nanos() as f64 / (n * bulk as u64) as f64
}

/// "best X ns" from the C program's line (`mode`: its `call` or `inline` loop).
fn run_c(exe: &Path, n: u64, mode: &str) -> Option<f64> {
    let o = Command::new(exe).args([n.to_string(), SUB.to_string(), mode.to_string()]).output().ok()?;
    let s = String::from_utf8_lossy(&o.stdout);
    s.split("best ").nth(1)?.split(' ').next()?.parse().ok()
}

/// Runs of `n` pairs per round and figure; a round's figure is the best of
/// them (short runs on a loaded machine: the best one ran undisturbed).
const SUB: usize = 10;

fn best_of(mut f: impl FnMut() -> f64) -> f64 {
    (0..SUB).map(|_| f()).fold(f64::INFINITY, f64::min)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let rounds: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(20);
    let mode = args.next().unwrap_or_else(|| "all".into());

    let a = PageAllocator::new(Config::new().arena_bytes(64 << 20).backing(Backing::None)).expect("allocator");
    let mut cfg = std::mem::MaybeUninit::<pagealloc_config>::uninit();
    // SAFETY: cfg is writable.
    assert_eq!(unsafe { pagealloc_config_default(cfg.as_mut_ptr()) }, pagealloc_status::PAGEALLOC_OK);
    // SAFETY: initialised just above.
    let mut cfg = unsafe { cfg.assume_init() };
    cfg.arena_bytes = 64 << 20;
    cfg.backing = PAGEALLOC_BACKING_NONE;
    let mut h: *mut Handle = std::ptr::null_mut();
    // SAFETY: valid config and out pointer.
    assert_eq!(unsafe { pagealloc_create(&cfg, &mut h) }, pagealloc_status::PAGEALLOC_OK);

    match mode.as_str() {
        "rust" => {
            rust_pairs(&a, n);
            return;
        }
        "rust-calls" => {
            rust_call_pairs(&a, n);
            return;
        }
        "ffi" => {
            ffi_pairs(h, n);
            return;
        }
        "rust-pf1" | "ffi-pf1" => {
            let (pa, ph) = pf1_allocators();
            let (mut v, mut w) = (Vec::with_capacity(PF1_PAGES), vec![0u64; PF1_PAGES]);
            for _ in 0..n as usize / PF1_PAGES + 1 {
                if mode == "rust-pf1" {
                    rust_pf1(&pa, &mut v);
                } else {
                    ffi_pf1(ph, &mut w);
                }
            }
            // SAFETY: made by pagealloc_create; nothing uses it afterwards.
            unsafe { pagealloc_destroy(ph) };
            return;
        }
        _ => {}
    }
    let c = build_c();
    // Warm-up.
    rust_pairs(&a, n / 10 + 1);
    ffi_pairs(h, n / 10 + 1);

    let (mut r, mut rc, mut f, mut cc, mut ci) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        r.push(best_of(|| rust_pairs(&a, n)));
        rc.push(best_of(|| rust_call_pairs(&a, n)));
        f.push(best_of(|| ffi_pairs(h, n)));
        if let Some(x) = c.as_deref().and_then(|e| run_c(e, n, "call")) {
            cc.push(x);
        }
        if let Some(x) = c.as_deref().and_then(|e| run_c(e, n, "inline")) {
            ci.push(x);
        }
    }
    let best = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    println!(
        "order-0 alloc+free pair, {rounds} rounds of the best of {SUB} runs of {n} pairs (ns per pair: best / median round)"
    );
    println!("  rust API        {:6.2} / {:6.2}", best(&r), median(&mut r.clone()));
    println!(
        "  rust API, calls {:6.2} / {:6.2}   ({:+.2} ns per pair over rust, median; not inlined)",
        best(&rc),
        median(&mut rc.clone()),
        median(&mut rc.clone()) - median(&mut r.clone())
    );
    println!(
        "  C API from Rust {:6.2} / {:6.2}   ({:+.2} ns per pair over rust, median)",
        best(&f),
        median(&mut f.clone()),
        median(&mut f.clone()) - median(&mut r.clone())
    );
    if !cc.is_empty() {
        println!(
            "  C API from C    {:6.2} / {:6.2}   ({:+.2} ns per pair over rust, median; own process)",
            best(&cc),
            median(&mut cc.clone()),
            median(&mut cc.clone()) - median(&mut r.clone())
        );
    }
    if !ci.is_empty() {
        println!(
            "  C inline (tcache){:6.2} / {:6.2}   ({:+.2} ns per pair over rust, median; own process)",
            best(&ci),
            median(&mut ci.clone()),
            median(&mut ci.clone()) - median(&mut r.clone())
        );
    }
    println!("bulk alloc+free through the array form, ns per page (best of {rounds} rounds)");
    for bulk in [16usize, 128] {
        let reps = (n / bulk as u64).max(1);
        let (mut rb, mut fb) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..rounds {
            rb = rb.min(best_of(|| rust_bulk(&a, bulk, reps)));
            fb = fb.min(best_of(|| ffi_bulk(h, bulk, reps)));
        }
        println!("  {bulk:3} pages: rust API {rb:5.2}, C API {fb:5.2} (+{:.2})", fb - rb);
    }
    let (pa, ph) = pf1_allocators();
    let (mut v, mut w) = (Vec::with_capacity(PF1_PAGES), vec![0u64; PF1_PAGES]);
    // Warm-up: every page of the pass faulted in once.
    rust_pf1(&pa, &mut v);
    ffi_pf1(ph, &mut w);
    let (mut rp, mut fp) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        rp.push((0..3).map(|_| rust_pf1(&pa, &mut v)).fold(f64::INFINITY, f64::min));
        fp.push((0..3).map(|_| ffi_pf1(ph, &mut w)).fold(f64::INFINITY, f64::min));
    }
    println!(
        "page_fault1 loop, 1 thread, {PF1_PAGES} pages a pass, ns per page ({rounds} rounds of the best of 3 passes: best / median round)"
    );
    println!("  rust API        {:6.2} / {:6.2}", best(&rp), median(&mut rp.clone()));
    println!(
        "  C API from Rust {:6.2} / {:6.2}   ({:+.2} ns per page over rust, median)",
        best(&fp),
        median(&mut fp.clone()),
        median(&mut fp.clone()) - median(&mut rp.clone())
    );
    // SAFETY: ph and h came from pagealloc_create and nothing uses them afterwards.
    unsafe {
        pagealloc_destroy(ph);
        pagealloc_destroy(h);
    }
}
