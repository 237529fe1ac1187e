"""The allocator's /proc reports as dataclasses; ``str(report)`` is the kernel's text."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Tuple


@dataclass(frozen=True)
class BuddyZone:
    nid: int
    zone: str
    free: Tuple[int, ...]
    """Free blocks of each order, 0 to MAX_ORDER."""

    @property
    def free_pages(self) -> int:
        return sum(n << order for order, n in enumerate(self.free))


@dataclass(frozen=True)
class BuddyInfo:
    zones: List[BuddyZone]
    text: str = field(repr=False)

    @classmethod
    def from_native(cls, text: str, zones: List[Any]) -> "BuddyInfo":
        return cls([BuddyZone(nid, zone, tuple(free)) for nid, zone, free in zones], text)

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class PageTypeZone:
    nid: int
    zone: str
    free: Dict[str, Tuple[int, ...]]
    """Free blocks of each order, per migratetype name."""
    pageblocks: Dict[str, int]


@dataclass(frozen=True)
class PageTypeInfo:
    zones: List[PageTypeZone]
    text: str = field(repr=False)

    @classmethod
    def from_native(cls, text: str, zones: List[Any]) -> "PageTypeInfo":
        return cls(
            [PageTypeZone(nid, z, {k: tuple(v) for k, v in free.items()}, dict(blocks)) for nid, z, free, blocks in zones],
            text,
        )

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class ZoneInfoZone:
    nid: int
    zone: str
    free: int
    min: int
    low: int
    high: int
    spanned: int
    present: int
    managed: int
    start_pfn: int
    stats: Dict[str, int]


@dataclass(frozen=True)
class ZoneInfo:
    zones: List[ZoneInfoZone]
    text: str = field(repr=False)

    @classmethod
    def from_native(cls, text: str, zones: List[Mapping[str, Any]]) -> "ZoneInfo":
        return cls([ZoneInfoZone(**z) for z in zones], text)

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class VmStat:
    counters: Dict[str, int]
    text: str = field(repr=False)

    def __getitem__(self, name: str) -> int:
        return self.counters[name]

    def __str__(self) -> str:
        return self.text
