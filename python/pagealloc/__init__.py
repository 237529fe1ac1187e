"""pagealloc: the Linux kernel's page-frame allocator (zoned buddy, migratetypes,
per-CPU lists, reclaim with shrinkers, compaction) as a Python package, with a
KV-cache block pool of mixed block sizes in :mod:`pagealloc.kv`.

>>> import pagealloc
>>> a = pagealloc.Allocator(arena_bytes=16 << 20)
>>> with a.alloc(order=2) as page:          # 4 pages, freed on leaving the block
...     view = memoryview(page)
...     view[:5] = b"hello"
...     view.release()
"""

from __future__ import annotations

import enum

from . import _native
from ._native import (
    MAX_ORDER,
    PAGE_SIZE,
    PAGEBLOCK_ORDER,
    ConfigError,
    InvalidFree,
    InvariantError,
    OutOfMemory,
    Page,
)
from .reports import BuddyInfo, PageTypeInfo, VmStat, ZoneInfo

__all__ = [
    "Allocator",
    "BuddyInfo",
    "ConfigError",
    "Gfp",
    "InvalidFree",
    "InvariantError",
    "MAX_ORDER",
    "OutOfMemory",
    "PAGE_SIZE",
    "PAGEBLOCK_ORDER",
    "Page",
    "PageTypeInfo",
    "VmStat",
    "ZoneInfo",
]


class Gfp(enum.IntFlag):
    """Allocation flags (the kernel's gfp_t, as pagealloc keeps them)."""

    KERNEL = 0
    """Unmovable allocation: no type bits."""
    MOVABLE = 1 << 0
    """Memory that may be moved (Movable pageblocks; may use the Movable zone)."""
    RECLAIMABLE = 1 << 1
    """Memory that can be reclaimed (Reclaimable pageblocks)."""
    HIGH = 1 << 2
    """High priority: may dip below the min watermark and use the HighAtomic reserve."""
    ZERO = 1 << 3
    """Zero the returned memory (a no-op without backing)."""
    THISNODE = 1 << 4
    """Never leave the requested node."""
    NO_COMPACT = 1 << 8
    """Never compact directly in the slow path."""
    ATOMIC = HIGH
    USER = MOVABLE


class Allocator(_native.Allocator):
    """A page allocator over an arena of ``arena_bytes`` (a multiple of 2 MiB).

    ``backing``: ``"anonymous"`` (mmap, pages get memory when touched),
    ``"hugepages"`` (2 MiB aligned, MADV_HUGEPAGE), ``"resident"`` (populated up
    front) or ``"none"`` (no memory: pfns are abstract block ids, for example
    indexes into a GPU tensor). ``nodes`` splits the arena into fake NUMA nodes.

    Allocation returns :class:`Page` objects that own their block and export it
    through the buffer protocol; ``alloc_pfn``/``free_pfn`` and
    ``alloc_bulk``/``free_bulk`` work on raw frame numbers. A raw free never
    frees a block a :class:`Page` owns, and while a ``BlockPool`` serves from
    the allocator the raw-pfn calls are refused (its blocks are plain ids a
    raw free could give two owners); Page objects work as ever. Errors are
    exceptions: :class:`OutOfMemory` (a ``MemoryError``), :class:`InvalidFree`
    and :class:`ConfigError` (``ValueError``), ``BufferError`` for a page with
    live views.
    """

    def buddyinfo(self) -> BuddyInfo:
        """/proc/buddyinfo: free blocks per order per zone; ``str()`` is the kernel's text."""
        text, zones = self._report("buddyinfo")
        return BuddyInfo.from_native(text, zones)

    def pagetypeinfo(self) -> PageTypeInfo:
        """/proc/pagetypeinfo: free blocks per migratetype and order, pageblocks per type."""
        text, zones = self._report("pagetypeinfo")
        return PageTypeInfo.from_native(text, zones)

    def zoneinfo(self) -> ZoneInfo:
        """/proc/zoneinfo: watermarks, sizes and counters per zone."""
        text, zones = self._report("zoneinfo")
        return ZoneInfo.from_native(text, zones)

    def vmstat(self) -> VmStat:
        """/proc/vmstat: event and state counters (a mapping)."""
        text, items = self._report("vmstat")
        return VmStat(text=text, counters=items)

    def __iter__(self):
        """Iterate over the zones of buddyinfo (nid, zone, free blocks per order)."""
        return iter(self.buddyinfo().zones)
