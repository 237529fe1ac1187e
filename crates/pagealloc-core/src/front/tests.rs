//! The owner's side of the slot protocol on one thread: the state word's one
//! compare refuses nesting, other allocators' slots, the placeholder and a
//! switched-off inline path; a paused slot refuses its owner. Ids far above
//! any allocator's, so no real allocator's slot is confused with these.

use super::*;

const BASE: u64 = 1 << 62;

#[test]
fn a_nested_operation_is_refused_until_the_outer_one_ends() {
    let f = Fronts::new(BASE + 1, (true, true));
    let g = f.current().and_then(Owner::enter).expect("first operation");
    assert!(f.current().and_then(Owner::enter).is_none(), "nested general entry");
    assert!(f.enter_inline_alloc().is_none(), "nested inline allocation");
    assert!(f.enter_inline_free().is_none(), "nested inline free");
    drop(g);
    assert!(f.enter_inline_alloc().is_some());
    assert!(f.enter_inline_free().is_some());
    assert!(f.current().and_then(Owner::enter).is_some());
}

#[test]
fn a_switched_off_inline_path_never_enters() {
    let f = Fronts::new(BASE + 2, (false, true));
    assert!(f.current().and_then(Owner::enter).is_some(), "the general path still enters");
    assert!(f.enter_inline_alloc().is_none());
    assert!(f.enter_inline_free().is_some());
}

#[test]
fn the_inline_paths_see_only_the_last_slot_used() {
    let (f1, f2) = (Fronts::new(BASE + 3, (true, true)), Fronts::new(BASE + 4, (true, true)));
    assert!(f1.current().is_some());
    assert!(f1.enter_inline_alloc().is_some());
    // f2 has no slot yet, and the thread's last slot is f1's.
    assert!(f2.enter_inline_alloc().is_none());
    assert!(f2.current().is_some());
    assert!(f2.enter_inline_alloc().is_some());
    assert!(f1.enter_inline_alloc().is_none(), "the last slot is f2's now");
    assert!(f1.current().is_some());
    assert!(f1.enter_inline_free().is_some());
}

#[test]
fn a_new_thread_starts_on_the_placeholder() {
    let f = Fronts::new(BASE + 5, (true, true));
    assert!(f.current().is_some());
    std::thread::scope(|s| {
        s.spawn(|| {
            assert!(f.enter_inline_alloc().is_none());
            assert!(f.enter_inline_free().is_none());
            assert!(f.current().and_then(Owner::enter).is_some(), "registers its own slot");
            assert!(f.enter_inline_alloc().is_some());
        });
    });
}

#[test]
fn a_paused_slot_refuses_its_owner() {
    // Pausing needs membarrier (registered by `available`, as an allocator does).
    if !available() {
        eprintln!("membarrier unavailable: the front cache is off here, nothing to pause");
        return;
    }
    let f = Fronts::new(BASE + 6, (true, true));
    assert!(f.current().is_some());
    let p = f.pause_all();
    assert!(f.enter_inline_alloc().is_none());
    assert!(f.current().and_then(Owner::enter).is_none());
    drop(p);
    assert!(f.enter_inline_alloc().is_some());
}

#[test]
fn the_prefetch_target_is_the_page_four_pops_ahead() {
    let mut s = FrontStack { nid: 0, key: NO_KEY, alloc_ev: VmEvent::PgallocNormal, len: 0, pfns: [0; FRONT_CAP] };
    for (i, p) in s.pfns.iter_mut().enumerate() {
        *p = 1000 + i as u32;
    }
    s.len = 10;
    // Pops hand out index 9, 8, 7, 6, ...: the fourth pop from now is index 6.
    assert_eq!(s.ahead(), 1000 + 10 - PREFETCH_AHEAD as u32);
    let mut popped = Vec::new();
    for _ in 0..PREFETCH_AHEAD {
        popped.push(s.pop().unwrap());
    }
    assert_eq!(popped.last(), Some(&(1000 + 10 - PREFETCH_AHEAD as u32)));
    // Fewer pages than that on the stack: a stale slot inside the array
    // (a hint's target only), never out of bounds.
    s.len = 1;
    assert_eq!(s.ahead(), 1000 + (FRONT_CAP + 1 - PREFETCH_AHEAD) as u32);
}
