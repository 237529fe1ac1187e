"""The block pool: API, errors, eviction, and random operation sequences
against a small model (hypothesis), with the invariants after each."""

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pagealloc import InvalidFree, OutOfMemory
from pagealloc.kv import BlockPool, order_for, pool_for


def small_pool(**kw):
    # 512 frames of 16 KiB (one pageblock); kinds of 1, 4 and 16 frames.
    return pool_for({"sliding": 16 << 10, "cross": 64 << 10, "full": 256 << 10}, 16 << 10, 8 << 20, **kw)


def conserved(pool: BlockPool) -> None:
    """Every frame is free in the allocator, held by the pool, or on the
    pool's free lists; after a drain the lists are empty and every frame is
    free or held."""
    pool.check_invariants()
    a = pool.allocator
    listed = pool.stats().free_list_frames
    assert a.nr_free_pages + pool.frames_held + listed == a.managed_pages
    assert pool.drain() == listed
    a.drain()  # with per-CPU lists on, the drained blocks may wait there
    pool.check_invariants()
    assert pool.stats().free_list_frames == 0
    assert a.nr_free_pages + pool.frames_held == a.managed_pages


def test_sizes_and_api():
    pool = small_pool()
    assert pool.kinds == {"sliding": 0, "cross": 2, "full": 4}
    assert order_for(3 << 10, 1 << 10) == 2
    full = pool.get_new_blocks(3, "full")
    assert [b.frames for b in full] == [16] * 3 and all(b.id % 16 == 0 for b in full)
    assert pool.ref_count(full[0]) == 1
    assert pool.cache_full_blocks(full, [b"a", b"b", 3]) == 3
    pool.touch(full[:1])
    pool.free_blocks(full)
    assert pool.ref_count(full[0]) == 1 and pool.ref_count(full[1]) == 0
    hit = pool.get_cached_block(b"b", "full")
    assert hit == full[1] and pool.get_cached_block(b"b", "cross") is None
    s = pool.stats()
    assert s.lru_blocks == 2 and s.hits == 1 and s.queries == 2
    assert pool.evict(1) == 1
    assert pool.get_cached_block(b"a", "full") is None or pool.ref_count(full[0]) == 1
    assert pool.reset_prefix_cache() == 1
    pool.free_blocks(full[:1])
    conserved(pool)
    assert pool.frames_held == 0


def test_bad_input():
    pool, other = small_pool(), small_pool()
    b = pool.get_new_blocks(1, "cross")
    with pytest.raises(ValueError, match="unknown block kind"):
        pool.get_new_blocks(1, "mamba")
    with pytest.raises(TypeError):
        pool.get_new_blocks(1, 3)
    with pytest.raises(ValueError, match="n must be >= 0"):
        pool.get_new_blocks(-1, "full")
    with pytest.raises(InvalidFree, match="another pool"):
        other.free_blocks(b)
    with pytest.raises(InvalidFree, match="double free"):
        pool.free_blocks(b + b)
    pool.free_blocks(b)
    with pytest.raises(InvalidFree, match="not held"):
        pool.free_blocks(b)
    with pytest.raises(TypeError, match="expected a Block"):
        pool.free_blocks([1])
    with pytest.raises(ValueError, match="hashes"):
        pool.cache_full_blocks(pool.get_new_blocks(1, "full"), [])
    with pytest.raises(ValueError):
        pool_for({"huge": 1 << 40}, 4096, 8 << 20)
    conserved(pool)


def test_large_block_evicts_and_merges_small_cached_ones():
    pool = small_pool()
    small = pool.get_new_blocks(512, "sliding")  # the whole arena in 1-frame blocks
    pool.cache_full_blocks(small, range(512))
    pool.free_blocks(small)  # all cached, unused, oldest first
    full = pool.get_new_blocks(2, "full")  # needs 32 frames: evicts, merges
    s = pool.stats()
    assert s.evicted >= 32 and s.lru_blocks == 512 - s.evicted
    conserved(pool)
    pool.free_blocks(full)
    with pytest.raises(OutOfMemory):
        pool.get_new_blocks(33, "full")
    conserved(pool)  # all or nothing: nothing leaked by the failure


def test_free_lists_reuse_and_give_back():
    pool = small_pool()  # lists keep 16 frames a kind (1/32 of 512)
    a = pool.allocator
    got = pool.get_new_blocks(4, "sliding")
    listed = pool.stats().free_list_frames
    assert listed > 0, "a refill puts a batch more on the list"
    free_before = a.nr_free_pages
    pool.free_blocks(got)
    assert a.nr_free_pages == free_before, "a free goes to the list, not the allocator"
    again = pool.get_new_blocks(4, "sliding")
    assert {b.id for b in again} == {b.id for b in got} and a.nr_free_pages == free_before
    with pytest.raises(InvalidFree, match="double free"):
        pool.free_blocks([again[0]] * 2)
    pool.free_blocks(again)
    with pytest.raises(InvalidFree, match="not held"):
        pool.free_blocks(again[:1])  # on the free list now: not held
    conserved(pool)


def test_lists_stay_under_their_mark_and_drain_for_larger_kinds():
    pool = small_pool()
    small = pool.get_new_blocks(512, "sliding")
    pool.free_blocks(small)
    s = pool.stats()
    assert 0 < s.free_list_frames <= 16
    # Every frame is needed: the listed ones must be given back to merge.
    full = pool.get_new_blocks(32, "full")
    assert pool.stats().free_list_frames == 0
    pool.free_blocks(full)
    conserved(pool)


def test_shrinker_drains_the_lists_for_another_user():
    pool = small_pool()
    a = pool.allocator
    pool.free_blocks(pool.get_new_blocks(512, "sliding"))
    assert pool.stats().free_list_frames > 0
    page = a.alloc(order=9)  # the whole arena: only reclaim can give it
    assert pool.stats().free_list_frames == 0 and pool.stats().shrinker_scans >= 1
    page.free()
    conserved(pool)


def test_raw_pfns_are_refused_while_a_pool_serves():
    # A raw free could free one of the pool's blocks (plain ids) and give it
    # two owners: the raw-pfn calls wait for the pool's close.
    pool = small_pool()
    a = pool.allocator
    blocks = pool.get_new_blocks(2, "cross")
    for call in (lambda: a.free_pfn(blocks[0].id, 0), lambda: a.free_bulk([blocks[0].id]),
                 lambda: a.alloc_pfn(0), lambda: a.alloc_bulk(2), lambda: a.alloc(0).detach()):
        with pytest.raises(InvalidFree, match="BlockPool"):
            call()
    pool.check_invariants()
    pool.close()
    a.free_pfn(a.alloc_pfn(0), 0)  # the pool closed: raw pfns again
    assert a.nr_free_pages == a.managed_pages


def test_close_gives_back_listed_blocks_too():
    pool = small_pool()
    a = pool.allocator
    blocks = pool.get_new_blocks(3, "cross")
    pool.free_blocks(blocks[:1])
    assert pool.stats().free_list_frames > 0
    pool.close()
    assert a.nr_free_pages == a.managed_pages
    with pytest.raises(ValueError, match="closed"):
        pool.get_new_blocks(1, "cross")
    with pytest.raises(ValueError, match="closed"):
        pool.free_blocks(blocks[1:])


def test_free_lists_off():
    pool = pool_for({"sliding": 16 << 10}, 16 << 10, 8 << 20, free_list_frames=0)
    a = pool.allocator
    pool.free_blocks(pool.get_new_blocks(8, "sliding"))
    assert pool.stats().free_list_frames == 0 and a.nr_free_pages == a.managed_pages
    with pytest.raises(ValueError, match="free_list_frames must be >= 0"):
        BlockPool(a, {"x": 0}, free_list_frames=-1)


class Model:
    """What the pool should hold: block id -> [kind, refs, hash]."""

    def __init__(self):
        self.blocks = {}
        self.cached = {}


ops = st.lists(
    st.tuples(st.sampled_from(["new", "free", "touch", "cache", "lookup", "evict", "reset"]),
              st.sampled_from(["sliding", "cross", "full"]), st.integers(0, 40)),
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(ops)
def test_random_operations_against_a_model(seq):
    pool = small_pool()
    m = Model()
    handles = {}
    for op, kind, n in seq:
        held = [i for i, b in m.blocks.items() if b[1] > 0]
        if op == "new":
            try:
                got = pool.get_new_blocks(n % 8, kind)
            except OutOfMemory:
                continue
            for b in got:
                assert b.id not in m.blocks, "a block handed out twice"
                handles[b.id] = b
                m.blocks[b.id] = [kind, 1, None]
        elif op == "free" and held:
            i = held[n % len(held)]
            pool.free_blocks([handles[i]])
            m.blocks[i][1] -= 1
        elif op == "touch" and m.blocks:
            i = sorted(m.blocks)[n % len(m.blocks)]
            pool.touch([handles[i]])
            m.blocks[i][1] += 1
        elif op == "cache" and held:
            i = held[n % len(held)]
            k = (m.blocks[i][0], n)
            if m.blocks[i][2] not in (None, n):
                with pytest.raises(ValueError, match="another hash"):
                    pool.cache_full_blocks([handles[i]], [n])
                continue
            pool.cache_full_blocks([handles[i]], [n])
            if m.blocks[i][2] is None and k not in m.cached:
                m.blocks[i][2], m.cached[k] = n, i
        elif op == "lookup":
            got = pool.get_cached_block(n, kind)
            assert (got.id if got else None) == m.cached.get((kind, n))
        elif op == "evict":
            pool.evict(n % 4)
        elif op == "reset":
            pool.reset_prefix_cache()
            m.cached.clear()
            for b in m.blocks.values():
                b[2] = None
        # Evictions (asked for, or made by an allocation) drop unused cached
        # blocks: sync the model with what the pool still holds, then check
        # what it must hold: every block in use, with its reference count.
        for i in list(m.blocks):
            refs = m.blocks[i][1]
            if refs == 0 and m.blocks[i][2] is None:
                del m.blocks[i]
                continue
            try:
                assert pool.ref_count(handles[i]) == refs
            except InvalidFree:
                assert refs == 0, "a block in use was evicted"
                m.cached.pop((m.blocks[i][0], m.blocks[i][2]), None)
                del m.blocks[i]
    conserved(pool)


def test_threads_share_a_pool():
    pool = small_pool(pcp_lists=True, front_cache=True)
    errors = []

    def work(t: int) -> None:
        try:
            for i in range(300):
                kind = ["sliding", "cross", "full"][(i + t) % 3]
                try:
                    blocks = pool.get_new_blocks(1 + i % 3, kind)
                except OutOfMemory:
                    continue
                pool.cache_full_blocks(blocks, [(t, i, j) and hash((t, i, j)) for j in range(len(blocks))])
                pool.touch(blocks)
                pool.free_blocks(blocks)
                pool.free_blocks(blocks)
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    pool.allocator.drain()
    conserved(pool)
