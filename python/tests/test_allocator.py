"""The allocator's API and its errors, pages and their buffer views."""

import gc
import threading

import pytest

import pagealloc
from pagealloc import Allocator, Gfp, InvalidFree, OutOfMemory

np = pytest.importorskip("numpy")


def conserved(a: Allocator, held_pages: int) -> None:
    a.drain()
    assert a.nr_free_pages + held_pages == a.managed_pages
    a.check_invariants()


def test_alloc_free_and_reports():
    a = Allocator(arena_bytes=8 << 20)
    pages = [a.alloc(order) for order in range(4)]
    assert [p.nbytes for p in pages] == [4096 << o for o in range(4)]
    conserved(a, sum(1 << o for o in range(4)))
    for p in pages:
        p.free()
    conserved(a, 0)
    info = a.buddyinfo()
    assert "Normal" in str(info)
    assert sum(z.free_pages for z in info.zones) == a.nr_free_pages
    assert a.vmstat()["nr_free_pages"] >= 0
    assert a.pagetypeinfo().zones[0].pageblocks
    assert a.zoneinfo().zones[0].managed == a.managed_pages
    assert "Allocator(" in repr(a) and "Page(" in repr(a.alloc())


def test_bad_input_is_an_exception():
    a = Allocator(arena_bytes=4 << 20)
    with pytest.raises(ValueError, match="arena_bytes must be >= 0"):
        Allocator(arena_bytes=-1)
    with pytest.raises(pagealloc.ConfigError):
        Allocator(arena_bytes=12345)
    with pytest.raises(ValueError, match="backing must be"):
        Allocator(arena_bytes=4 << 20, backing="gpu")
    with pytest.raises(ValueError, match="order must be in 0..=10"):
        a.alloc(11)
    with pytest.raises(ValueError, match="order"):
        a.alloc(-1)
    with pytest.raises(ValueError, match="gfp"):
        a.alloc(0, gfp=1 << 20)
    pfn = a.alloc_pfn(1)
    with pytest.raises(InvalidFree):
        a.free_pfn(pfn, 0)  # wrong order
    a.free_pfn(pfn, 1)
    with pytest.raises(InvalidFree):
        a.free_pfn(pfn, 1)  # double free
    with pytest.raises(ValueError, match="pfn must be >= 0"):
        a.free_pfn(-5)
    with pytest.raises(OutOfMemory):
        [a.alloc(10) for _ in range(8)]
    with pytest.raises(InvalidFree, match="another allocator"):
        Allocator(arena_bytes=4 << 20).free(a.alloc())
    a.check_invariants()


def test_views_refuse_free_and_never_dangle():
    a = Allocator(arena_bytes=4 << 20)
    page = a.alloc(1, Gfp.ZERO)
    arr = np.frombuffer(page, np.uint32)
    arr[:] = 7
    assert page.exports == 1
    with pytest.raises(BufferError, match="live buffer view"):
        page.free()
    with pytest.raises(BufferError):
        a.free(page)
    m = memoryview(page)
    assert m.nbytes == 8192 and m[0] == 7
    del page  # the views keep the page (and the block) alive
    gc.collect()
    assert arr.sum() == 7 * 2048
    m.release()
    base = arr.base
    del arr, base
    gc.collect()
    conserved(a, 0)  # the last view gone, the page object frees its block


def test_raw_frees_refuse_a_pages_block():
    # A raw free of a block a Page owns would hand its views' memory to the
    # next allocation: refused, whatever the views, until the page lets go.
    a = Allocator(arena_bytes=4 << 20)
    page = a.alloc(1)
    view = memoryview(page)
    with pytest.raises(InvalidFree, match="belongs to a Page"):
        a.free_pfn(page.pfn, 1)
    with pytest.raises(InvalidFree, match="belongs to a Page"):
        a.free_bulk([a.alloc_pfn(0), page.pfn])
    view[0] = 9  # still this page's memory
    view.release()
    pfn = page.detach()  # now a raw pfn, freed the raw way
    a.free_pfn(pfn, 1)
    with pytest.raises(InvalidFree):
        a.free_pfn(pfn, 1)
    conserved(a, 1)  # the order-0 page of the refused bulk free is still held


def test_context_manager_and_detach():
    a = Allocator(arena_bytes=4 << 20)
    with a.alloc(2) as p:
        with memoryview(p) as m:
            m[:3] = b"abc"
        assert bytes(memoryview(p)[:3]) == b"abc"
    assert not p.owned
    with pytest.raises(BufferError, match="freed"):
        memoryview(p)
    q = a.alloc(0)
    pfn = q.detach()
    with pytest.raises(InvalidFree):
        q.free()
    a.free_pfn(pfn)
    with a:
        pass
    with pytest.raises(ValueError, match="closed"):
        a.alloc()


def test_no_backing_has_ids_but_no_memory():
    a = Allocator(arena_bytes=4 << 20, backing="none")
    p = a.alloc(3)
    assert p.address is None and p.pfn % 8 == 0
    with pytest.raises(BufferError, match="backing='none'"):
        memoryview(p)
    p.free()


def test_bulk_into_list_and_numpy():
    a = Allocator(arena_bytes=4 << 20)
    pfns = a.alloc_bulk(100)
    assert len(set(pfns)) == 100
    out = np.zeros(50, np.uint64)
    assert a.alloc_bulk(50, out=out) == 50
    assert len(set(out.tolist()) | set(pfns)) == 150
    conserved(a, 150)
    a.free_bulk(pfns)
    a.free_bulk(out)
    with pytest.raises(InvalidFree):
        a.free_bulk(out[:1])
    with pytest.raises(ValueError, match="uint64"):
        a.alloc_bulk(2, out=np.zeros(2, np.int8))
    with pytest.raises(ValueError, match="fewer than"):
        a.alloc_bulk(5, out=np.zeros(2, np.uint64))
    with pytest.raises(ValueError, match="n must be >= 0"):
        a.alloc_bulk(-1)
    conserved(a, 0)


def test_threads_share_an_allocator():
    a = Allocator(arena_bytes=16 << 20)
    errors = []

    def work(seed: int) -> None:
        try:
            held = []
            for i in range(2000):
                if held and (i * seed) % 3 == 0:
                    held.pop().free()
                else:
                    p = a.alloc(i % 3)
                    memoryview(p)[0] = seed
                    held.append(p)
            for p in held:
                assert memoryview(p)[0] == seed
                p.free()
        except Exception as e:  # reported below, in the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    conserved(a, 0)
