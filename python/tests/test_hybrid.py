"""Hybrid models: exact state blocks, eviction by region, vLLM's plan as its
code computes it, the two layouts, and the simulation's headline figures."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pagealloc import Allocator, ConfigError, InvalidFree, OutOfMemory
from pagealloc.bench import hybrid, layouts, shapes, vllm_plan, vllm_ref
from pagealloc.kv import BlockPool

_WHEEL = vllm_ref.find_wheel()
needs_vllm = pytest.mark.skipif(_WHEEL is None, reason="vLLM 0.33.0 wheel could not be downloaded")


def pool(frames=1024, **kinds):
    a = Allocator(arena_bytes=frames * 4096, backing="none", pcp_lists=False, front_cache=False, min_free_kbytes=0)
    return BlockPool(a, kinds or {"small": 0, "state": (3, 5)})


def conserved(p):
    p.check_invariants()
    a = p.allocator
    assert a.nr_free_pages + p.frames_held + p.stats().free_list_frames == a.managed_pages


def test_exact_kind_gives_the_tail_back():
    p = pool()
    free0 = p.allocator.nr_free_pages
    b = p.get_new_blocks(4, "state")
    assert p.allocator.nr_free_pages == free0 - 4 * 5
    assert p.stats().kinds["state"] == (4, 4, 20)
    # The tail of each block is free for others: 3 frames after each 5.
    small = p.get_new_blocks(12, "small")
    assert len(small) == 12
    conserved(p)
    p.cache_full_blocks(b[:1], [b"s"])
    p.free_blocks(b)
    assert p.stats().lru_frames == 5
    assert p.get_cached_block(b"s", "state") == b[0]
    p.free_blocks(small)
    assert p.evict(10) == 1
    conserved(p)
    p.drain()
    assert p.frames_held == 0 and p.allocator.nr_free_pages == free0


@pytest.mark.parametrize("spec", [(3, 4), (3, 9), (3, 0), (0, 1), (11, 1500), (3, -5)])
def test_exact_kind_bad_config(spec):
    a = Allocator(arena_bytes=2 << 20, backing="none")
    with pytest.raises((ConfigError, ValueError)):
        BlockPool(a, {"state": spec})


def test_region_eviction_frees_a_whole_region():
    """Small cached blocks fill the arena; a large block needs one aligned
    region: only that region's blocks are evicted, not the oldest ones."""
    p = pool(frames=1024, small=0, big=9)
    held = p.get_new_blocks(1024, "small")
    p.cache_full_blocks(held, list(range(1024)))
    # Free them newest region first: oldest-first eviction would then take
    # blocks from the second region before the first is empty.
    p.free_blocks(held[512:])
    p.free_blocks(held[:512][::2])
    assert p.allocator.nr_free_pages == 0
    big = p.get_new_blocks(1, "big")
    assert big[0].id == 512
    s = p.stats()
    assert s.evicted == 512, "exactly one region's cached blocks go"
    assert all(p.ref_count(h) == 1 for h in held[1:512:2])
    conserved(p)


ops = st.lists(st.tuples(st.sampled_from(["new", "free", "cache", "lookup", "touch"]),
                         st.sampled_from(["small", "state", "mid"]), st.integers(0, 30)), max_size=80)


@settings(max_examples=60, deadline=None)
@given(ops)
def test_random_exact_and_plain_kinds(seq):
    """Random operations on exact and plain kinds: no block handed out twice,
    no frame of a held block free, the identities after every step."""
    p = pool(frames=512, small=0, mid=2, state=(4, 11))
    held, handles = {}, {}
    for op, kind, n in seq:
        if op == "new":
            try:
                got = p.get_new_blocks(n % 5, kind)
            except OutOfMemory:
                continue
            for b in got:
                assert b.id not in held
                held[b.id] = 1
                handles[b.id] = b
        elif op == "free" and held:
            i = sorted(held)[n % len(held)]
            p.free_blocks([handles[i]])
            held[i] -= 1
            if held[i] == 0:
                del held[i]
        elif op == "cache" and held:
            i = sorted(held)[n % len(held)]
            try:
                p.cache_full_blocks([handles[i]], [n])
            except ValueError:
                pass
        elif op == "lookup":
            got = p.get_cached_block(n, kind)
            if got is not None:
                p.touch([got])
                held[got.id] = held.get(got.id, 0) + 1
                handles[got.id] = got
        for i, refs in held.items():
            assert p.ref_count(handles[i]) == refs
        conserved(p)
    for i, refs in held.items():
        p.free_blocks([handles[i]] * refs)
    p.reset_prefix_cache()
    assert p.frames_held == 0
    for h in list(handles.values())[:3]:
        with pytest.raises(InvalidFree):
            p.free_blocks([h])


def test_vllm_block_sizes_from_its_formula():
    """vLLM's logged block sizes: 528 tokens for Qwen3.5-4B
    (vllm-project/vllm#40696), 7,808 for GLM-5.3-Flash (vllm#54458); 16 where
    nothing is aligned."""
    assert vllm_plan.block_size(shapes.qwen3_5_4b()) == 528
    assert vllm_plan.block_size(shapes.glm5_3_flash()) == 7808
    for f in (shapes.gemma2, shapes.gemma3, shapes.llama32_vision):
        assert vllm_plan.block_size(f()) == 16


def test_vllm_grouping():
    """_get_kv_cache_groups_uniform_page_size: GLM's 11 MLA and 34 KDA layers
    give 1 + 4 groups of 11 layer slots (9, 9, 8, 8 KDA layers)."""
    plan = vllm_plan.plan(shapes.glm5_3_flash(), 24 << 30)
    assert plan.group_size == 11
    assert sorted(g.layers for g in plan.groups if g.layer.kind == "state") == [8, 8, 9, 9]
    assert plan.page == 7808 * 576
    q = vllm_plan.plan(shapes.qwen3_5_4b(), 4 << 30)
    assert q.page == 528 * 4096 and q.group_size == 8 and len(q.groups) == 4


@pytest.mark.parametrize("make", shapes.SHAPES, ids=lambda f: f.__name__)
def test_pagealloc_layout_pads_nothing(make):
    s = make()
    unit, groups, pools = layouts.pagealloc_layout(s, 1 << 30)
    for ly, n in s.layers.items():
        if ly.kind == "indexer":
            continue
        assert sum(g.layers for g in groups if g.layer == ly) == n
    for g in groups:
        need = g.useful_state_bytes if g.layer.kind == "state" else g.tokens * g.useful_token_bytes
        assert need <= g.block_bytes < need + unit + 1
    pools.check()


def test_qwen_prefix_hits():
    """The Qwen3.5-4B target: 480-token shared prefixes hit at 16-token blocks."""
    s = shapes.qwen3_5_4b()
    r = hybrid.run_shape(s, 200, 3, strategies=["pagealloc"] + (["vllm"] if _WHEEL else []), wheel=_WHEEL)
    assert r["pagealloc"]["hit_rate"] >= 0.9
    assert r["pagealloc"]["waste"] <= 0.03
    if _WHEEL:
        assert r["vllm"]["hit_rate"] == 0.0


@needs_vllm
def test_no_padding_shapes_never_worse():
    """Where vLLM pads nothing, pagealloc runs at least as many requests
    (a smaller memory and trace than the benchmark's, to stay quick)."""
    for make in (shapes.gemma2, shapes.gemma3, shapes.llama32_vision):
        s = dataclasses.replace(make(), memory_gib=2)
        r = hybrid.run_shape(s, 40, 2, strategies=["vllm", "pagealloc"], wheel=_WHEEL)
        assert r["pagealloc"]["max_running"] >= r["vllm"]["max_running"], s.name
