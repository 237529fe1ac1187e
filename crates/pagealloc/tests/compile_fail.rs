//! The walls around the allocator's insides, pinned: each program in
//! `compile-fail/` reaches for state whose invariants the safe API relies
//! on (a frame's flags, a zone, a per-CPU list, a second handle of one
//! block) from safe code outside the workspace, and must not compile. The
//! expected compiler messages sit beside each program (`.stderr`); after a
//! toolchain update regenerate them with `TRYBUILD=overwrite cargo test -p
//! pagealloc --test compile_fail` and check that every one still fails for
//! its reason (a private item, or an `unsafe` call outside `unsafe`).

#[test]
fn safe_code_has_no_way_in() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/compile-fail/*.rs");
}
