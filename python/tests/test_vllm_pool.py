"""vLLM's own block-pool unit tests, rewritten, run against vLLM 0.33's
``BlockPool`` (loaded unchanged from its wheel) and ``pagealloc.kv.vllm``.

Each test names the vLLM test it comes from (``tests/v1/core/`` of
vllm-project/vllm). vLLM's versions build requests with torch-backed
``Request`` objects and a ``KVCacheManager``; here a request is the one
attribute the pool reads (``block_hashes``) and the manager's calls are
made on the pool directly, in the order the manager makes them. A
randomized test then drives both pools with the same operations and
compares every answer.

The vLLM wheel is fetched with ``pip download --no-deps vllm==0.33.0`` (CI
does so); without network access the vLLM half is skipped, with the reason.
"""

from __future__ import annotations

import hashlib
import random
from types import SimpleNamespace

import pytest

from pagealloc.bench import vllm_ref
from pagealloc.kv import vllm as drop_in

_WHEEL = vllm_ref.find_wheel()


def _impls():
    out = [pytest.param("pagealloc", id="pagealloc")]
    marks = [] if _WHEEL else [pytest.mark.skip(reason="vLLM 0.33.0 wheel could not be downloaded")]
    out.append(pytest.param("vllm", id="vllm", marks=marks))
    return out


@pytest.fixture(params=_impls())
def impl(request):
    if request.param == "vllm":
        v = vllm_ref.load(_WHEEL)
        return SimpleNamespace(name="vllm", BlockPool=v.BlockPool, KVCacheBlock=v.KVCacheBlock)
    return SimpleNamespace(name="pagealloc", BlockPool=drop_in.BlockPool, KVCacheBlock=drop_in.KVCacheBlock)


def chain_hashes(tokens, block_size):
    """Block hashes as vLLM chains them: each over its parent and its tokens."""
    out, parent = [], b""
    for i in range(len(tokens) // block_size):
        parent = hashlib.sha256(parent + repr(tuple(tokens[i * block_size:(i + 1) * block_size])).encode()).digest()
        out.append(parent)
    return out


def request(tokens, block_size):
    return SimpleNamespace(block_hashes=chain_hashes(tokens, block_size), all_token_ids=list(tokens))


def ids(blocks):
    return [b.block_id for b in blocks]


def test_cache_blocks(impl):
    """test_prefix_caching.py::test_cache_blocks."""
    pool = impl.BlockPool(num_gpu_blocks=5, enable_caching=True, hash_block_size=4)
    req = request(list(range(14)), 4)
    blocks = [impl.KVCacheBlock(block_id=i) for i in range(2)]
    pool.cache_full_blocks(request=req, blocks=blocks, num_cached_blocks=0, num_full_blocks=2, block_size=4,
                           kv_cache_group_id=0)
    assert len(pool.cached_block_hash_to_block) == 2
    assert all(b.block_hash is not None for b in blocks)
    blocks += [impl.KVCacheBlock(block_id=2)]
    pool.cache_full_blocks(request=req, blocks=blocks, num_cached_blocks=2, num_full_blocks=3, block_size=4,
                           kv_cache_group_id=0)
    assert len(pool.cached_block_hash_to_block) == 3
    assert blocks[2].block_hash is not None


def test_cache_blocks_multi_group(impl):
    """test_prefix_caching.py::test_cache_blocks_multi_group."""
    pool = impl.BlockPool(num_gpu_blocks=10, enable_caching=True, hash_block_size=4)
    req = request(list(range(14)), 4)
    g0 = [impl.KVCacheBlock(block_id=i) for i in range(2)]
    pool.cache_full_blocks(req, g0, 0, 2, 4, 0)
    g1 = [impl.KVCacheBlock(block_id=i) for i in range(3)]
    pool.cache_full_blocks(req, g1, 0, 3, 4, 1)
    assert len(pool.cached_block_hash_to_block) == 5
    h = req.block_hashes
    assert pool.get_cached_block(h[0], [0]) is not None
    assert pool.get_cached_block(h[1], [0]) is not None
    assert pool.get_cached_block(h[2], [0]) is None
    assert all(pool.get_cached_block(x, [1]) is not None for x in h)
    assert ids(pool.get_cached_block(h[1], [0, 1])) == [1, 1]
    assert pool.get_cached_block(h[2], [0, 1]) is None


def test_prefill_order(impl):
    """test_prefix_caching.py::test_prefill, the pool's part: the free-queue
    order after two requests share a prefix, and the eviction order it sets."""
    pool = impl.BlockPool(num_gpu_blocks=11, enable_caching=True, hash_block_size=16)
    common = [i for i in range(3) for _ in range(16)]
    r0 = request(common + [3] * 7, 16)
    b0 = pool.get_new_blocks(4)
    assert ids(b0) == [1, 2, 3, 4]
    pool.cache_full_blocks(r0, b0, 0, 3, 16, 0)
    hit = [pool.get_cached_block(h, [0])[0] for h in r0.block_hashes]
    assert ids(hit) == [1, 2, 3]
    pool.touch(hit)
    b1 = hit + pool.get_new_blocks(1)
    assert ids(b1[3:]) == [5]
    assert all(b.ref_cnt == 2 for b in hit)
    assert pool.get_num_free_blocks() == 5
    # The manager frees a request's blocks last first (eviction order).
    pool.free_blocks(reversed(b0))
    pool.free_blocks(reversed(b1))
    assert pool.get_num_free_blocks() == 10
    hit = [pool.get_cached_block(h, [0])[0] for h in r0.block_hashes]
    pool.touch(hit)
    b2 = hit + pool.get_new_blocks(1)
    assert ids(b2[3:]) == [5]
    assert pool.get_num_free_blocks() == 6
    pool.free_blocks(reversed(b2))
    # [partial 5, 4 first][never used 6..10][cached 3, 2, 1 last]
    b3 = pool.get_new_blocks(10)
    assert ids(b3) == [5, 4, 6, 7, 8, 9, 10, 3, 2, 1]
    assert pool.get_num_free_blocks() == 0
    # Reusing a cached block evicted it.
    assert pool.get_cached_block(r0.block_hashes[0], [0]) is None
    assert all(b.ref_cnt == 1 and b.block_hash is None for b in b3)


def test_evict_order_lru(impl):
    """test_prefix_caching.py::test_evict: cached blocks are evicted least
    recently freed first, after every block without a hash."""
    pool = impl.BlockPool(num_gpu_blocks=11, enable_caching=True, hash_block_size=16)
    r = request(list(range(16 * 10)), 16)
    a = pool.get_new_blocks(5)
    pool.cache_full_blocks(r, a, 0, 5, 16, 0)
    b = pool.get_new_blocks(5)
    pool.cache_full_blocks(r, [a[0]] * 5 + b, 5, 10, 16, 0)
    pool.free_blocks(a[::-1])
    pool.free_blocks(b[:3])
    assert pool.get_num_free_blocks() == 8
    got = pool.get_new_blocks(8)
    assert ids(got) == [5, 4, 3, 2, 1, 6, 7, 8]
    pool.free_blocks(got)
    pool.free_blocks(b[3:])
    assert pool.get_num_free_blocks() == 10


def test_touch_takes_cached_block_back(impl):
    """test_prefix_caching.py::test_prefill (cache hit when the block is free)."""
    pool = impl.BlockPool(num_gpu_blocks=6, enable_caching=True, hash_block_size=4)
    r = request(list(range(8)), 4)
    b = pool.get_new_blocks(2)
    pool.cache_full_blocks(r, b, 0, 2, 4, 0)
    pool.free_blocks(b)
    assert pool.get_num_free_blocks() == 5
    c = pool.get_cached_block(r.block_hashes[1], [0])
    pool.touch(c)
    assert c[0].ref_cnt == 1 and pool.get_num_free_blocks() == 4
    # The touched block is not handed out again while in use.
    assert c[0].block_id not in ids(pool.get_new_blocks(4))


def test_null_block(impl):
    """test_block_pool_double_free.py::test_null_block_never_freed, and the
    null block's id and place (block_pool.py: taken first, never pooled)."""
    pool = impl.BlockPool(num_gpu_blocks=8, enable_caching=True, hash_block_size=16)
    null = pool.null_block
    assert null.is_null and null.block_id == 0
    assert pool.get_num_free_blocks() == 7
    pool.free_blocks([null, null])
    pool.touch([null])
    assert pool.get_num_free_blocks() == 7
    assert 0 not in ids(pool.get_new_blocks(7))


def test_get_new_blocks_too_many(impl):
    """block_pool.py: get_new_blocks raises ValueError and changes nothing."""
    pool = impl.BlockPool(num_gpu_blocks=4, enable_caching=True, hash_block_size=16)
    with pytest.raises(ValueError):
        pool.get_new_blocks(4)
    assert pool.get_num_free_blocks() == 3
    assert len(pool.get_new_blocks(3)) == 3


def test_usage(impl):
    """test_block_pool.py::test_get_usage: the null block is not usage."""
    pool = impl.BlockPool(num_gpu_blocks=4, enable_caching=True, hash_block_size=16)
    assert pool.get_usage() == 0.0
    pool.get_new_blocks(2)
    assert pool.get_usage() == pytest.approx(2 / 3)


def test_reset_prefix_cache(impl):
    """test_prefix_caching.py::test_reset_prefix_cache: refused while blocks
    are in use; afterwards no hash is left."""
    pool = impl.BlockPool(num_gpu_blocks=6, enable_caching=True, hash_block_size=4)
    r = request(list(range(12)), 4)
    b = pool.get_new_blocks(3)
    pool.cache_full_blocks(r, b, 0, 3, 4, 0)
    assert not pool.reset_prefix_cache()
    pool.free_blocks(b)
    assert pool.reset_prefix_cache()
    assert len(pool.cached_block_hash_to_block) == 0
    assert all(x.block_hash is None for x in b)
    assert pool.get_cached_block(r.block_hashes[0], [0]) is None


def test_evict_blocks(impl):
    """test_prefix_caching.py::test_evict_blocks: eviction by id drops only
    the hash; a block in use stays in use."""
    pool = impl.BlockPool(num_gpu_blocks=6, enable_caching=True, hash_block_size=4)
    r = request(list(range(12)), 4)
    b = pool.get_new_blocks(3)
    pool.cache_full_blocks(r, b, 0, 3, 4, 0)
    pool.free_blocks(b[2:])
    pool.evict_blocks({b[0].block_id, b[2].block_id})
    assert pool.get_cached_block(r.block_hashes[0], [0]) is None
    assert pool.get_cached_block(r.block_hashes[1], [0]) is not None
    assert pool.get_cached_block(r.block_hashes[2], [0]) is None
    assert b[0].ref_cnt == 1 and pool.get_num_free_blocks() == 3


def test_duplicate_hash_two_blocks(impl):
    """test_prefix_caching.py::test_block_lookup_cache_multi_blocks_per_key:
    two blocks cached under one hash; evicting one leaves the other."""
    pool = impl.BlockPool(num_gpu_blocks=6, enable_caching=True, hash_block_size=4)
    r = request(list(range(4)), 4)
    a = pool.get_new_blocks(1)
    b = pool.get_new_blocks(1)
    pool.cache_full_blocks(r, a, 0, 1, 4, 0)
    pool.cache_full_blocks(r, b, 0, 1, 4, 0)
    assert len(pool.cached_block_hash_to_block) == 1
    assert pool.get_cached_block(r.block_hashes[0], [0])[0].block_id == a[0].block_id
    pool.evict_blocks({a[0].block_id})
    assert pool.get_cached_block(r.block_hashes[0], [0])[0].block_id == b[0].block_id


def test_caching_disabled(impl):
    """block_pool.py: without caching, freed blocks go to the front of the
    queue, each call's blocks in the order given."""
    pool = impl.BlockPool(num_gpu_blocks=6, enable_caching=False, hash_block_size=4)
    a = pool.get_new_blocks(3)
    pool.free_blocks(a)
    assert ids(pool.get_new_blocks(5)) == [1, 2, 3, 4, 5]


def test_randomized_against_vllm():
    """Both pools, driven by the same random operations, give the same
    blocks, free counts, hits and usage at every step."""
    if not _WHEEL:
        pytest.skip("vLLM 0.33.0 wheel could not be downloaded")
    v = vllm_ref.load(_WHEEL)
    for seed in range(6):
        rng = random.Random(seed)
        n = rng.randint(8, 64)
        pools = [v.BlockPool(n, True, 4), drop_in.BlockPool(n, True, 4)]
        held = [[], []]  # per pool: lists of blocks, one per request
        families = [request([f] * 4 + list(range(40)), 4) for f in range(4)]
        for step in range(400):
            op = rng.random()
            if op < 0.45:
                k = rng.randint(0, 6)
                res = []
                for p in pools:
                    try:
                        res.append(p.get_new_blocks(k))
                    except ValueError:
                        res.append(None)
                assert (res[0] is None) == (res[1] is None), (seed, step)
                if res[0] is not None:
                    assert ids(res[0]) == ids(res[1]), (seed, step)
                    fam = families[rng.randrange(4)]
                    full = rng.randint(0, min(k, len(fam.block_hashes)))
                    for p, bl in zip(pools, res):
                        p.cache_full_blocks(fam, bl, 0, full, 4, 0)
                        held[pools.index(p)].append(bl)
            elif op < 0.75 and held[0]:
                i = rng.randrange(len(held[0]))
                for p, h in zip(pools, held):
                    p.free_blocks(list(reversed(h.pop(i))))
            elif op < 0.95:
                fam = families[rng.randrange(4)]
                got = []
                for p in pools:
                    hits = []
                    for hsh in fam.block_hashes:
                        c = p.get_cached_block(hsh, [0])
                        if c is None:
                            break
                        hits.append(c[0])
                    p.touch(hits)
                    got.append(hits)
                assert ids(got[0]) == ids(got[1]), (seed, step)
                for h, g in zip(held, got):
                    h.append(g)
            else:
                assert pools[0].reset_prefix_cache() == pools[1].reset_prefix_cache()
            assert pools[0].get_num_free_blocks() == pools[1].get_num_free_blocks(), (seed, step)
            assert pools[0].get_usage() == pytest.approx(pools[1].get_usage())
            for a, b in zip(held[0], held[1]):
                assert [x.ref_cnt for x in a] == [x.ref_cnt for x in b], (seed, step)


def test_drop_in_bad_input():
    """Misuse is a Python exception and changes nothing (vLLM 0.33 asserts,
    or drives a count negative: test_block_pool_double_free.py's cases)."""
    pool = drop_in.BlockPool(8, True, 4)
    b = pool.get_new_blocks(2)
    free = pool.get_num_free_blocks()
    for bad in ([b[0], b[0]], [b[1], b[0], b[1]]):
        with pytest.raises(ValueError):
            pool.free_blocks(bad)
        assert [x.ref_cnt for x in b] == [1, 1] and pool.get_num_free_blocks() == free
    other = drop_in.BlockPool(8, True, 4).get_new_blocks(1)
    with pytest.raises(NotImplementedError):
        pool.free_blocks(other)
    with pytest.raises(TypeError):
        pool.free_blocks([object()])
    for n, exc in ((2**40, ValueError), (2**62, ValueError), (-1, ValueError), (1.5, TypeError), (True, TypeError)):
        with pytest.raises(exc):
            pool.get_new_blocks(n)
    for args, exc in (((0, True, 4), ValueError), ((2.0, True, 4), TypeError), ((4, True, -16), ValueError)):
        with pytest.raises(exc):
            drop_in.BlockPool(*args)
    with pytest.raises(ValueError):
        pool.evict_blocks({8})
    pool.free_blocks(b)
    assert pool.get_num_free_blocks() == 7


@pytest.mark.skipif(_WHEEL is None, reason="vLLM 0.33.0 wheel could not be downloaded")
def test_stubs_raise_and_the_pool_is_vllms_own():
    """The baseline is vLLM's code from the wheel; what it imports besides
    is a stub that raises when reached (vllm_ref's promise)."""
    v = vllm_ref.load(_WHEEL)
    assert v.block_pool.__file__.endswith("vllm/v1/core/block_pool.py")
    assert v.block_pool.__file__.startswith(_WHEEL)
    stub = v.block_pool.get_mm_features_in_window
    with pytest.raises(vllm_ref.StubCalled):
        stub([], 0, 1)
    with pytest.raises(vllm_ref.StubCalled):
        bool(v.block_pool.BlockStored)
    # KV events would reach the stubbed event classes: vLLM's pool then fails.
    pool = v.BlockPool(8, True, 4, enable_kv_cache_events=True)
    b = pool.get_new_blocks(1)
    with pytest.raises(vllm_ref.StubCalled):
        pool.cache_full_blocks(request(list(range(4)), 4), b, 0, 1, 4, 0)
