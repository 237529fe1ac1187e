"""vLLM's own ``BlockPool``, loaded unchanged from its wheel: the baseline.

``pip download --no-deps vllm==0.33.0`` fetches the wheel (a zip; nothing
is installed, so torch is never pulled). :func:`load` imports, straight from
that zip, the modules the block pool is made of:

- ``vllm/v1/core/block_pool.py`` (``BlockPool``, ``BlockHashToBlockMap``),
- ``vllm/v1/core/kv_cache_utils.py`` (``KVCacheBlock``,
  ``FreeKVCacheBlockQueue``, the block-hash helpers),
- ``vllm/v1/core/kv_cache_metrics.py``, ``vllm/utils/math_utils.py``.

Every other ``vllm`` module they import (and ``torch``, ``msgspec``,
``zmq``, ``cbor2``) is a stub: a name that can be imported, used in an
annotation, compared or hashed, but that raises :class:`StubCalled` when
called, instantiated or read as a value it does not have. So a baseline
figure can never come from a stand-in: if vLLM's pool ever reached one of
them, the run would fail. One exception, named here: ``vllm.logger`` gives
``logging.getLogger(name)``, which is what vLLM's ``init_logger`` returns
(with vLLM's handlers, which do not matter to a pool); a stub logger would
fail ``reset_prefix_cache``, which logs.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import logging
import os
import subprocess
import sys
import types
import zipfile
from typing import Dict, Optional

VERSION = "0.33.0"
"""The vLLM release whose code is the baseline (pinned: its tests were ported from it)."""

REAL = (
    "vllm.v1.core.block_pool",
    "vllm.v1.core.kv_cache_utils",
    "vllm.v1.core.kv_cache_metrics",
    "vllm.utils.math_utils",
)
"""Modules loaded from the wheel as they are."""

STUBBED_TOP = ("vllm", "torch", "msgspec", "zmq", "cbor2", "xxhash")


class StubCalled(RuntimeError):
    """vLLM's code reached a stub: the baseline would not be vLLM's own."""


class _Stub:
    """A stand-in name: importable, usable in annotations, never callable."""

    def __init__(self, name: str):
        object.__setattr__(self, "_name", name)

    def __getattr__(self, attr: str) -> "_Stub":
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return _Stub(f"{self._name}.{attr}")

    def __call__(self, *args, **kwargs):
        raise StubCalled(f"vLLM's code called the stub {self._name}")

    def __getitem__(self, item) -> "_Stub":
        return _Stub(f"{self._name}[...]")

    def __or__(self, other) -> "_Stub":
        return _Stub(f"{self._name} | ...")

    __ror__ = __or__

    def __bool__(self) -> bool:
        raise StubCalled(f"vLLM's code read the stub {self._name} as a value")

    def __iter__(self):
        raise StubCalled(f"vLLM's code iterated the stub {self._name}")

    def __mro_entries__(self, bases):
        raise StubCalled(f"vLLM's code subclassed the stub {self._name}")

    def __repr__(self) -> str:
        return f"<stub {self._name}>"


class _StubModule(types.ModuleType):
    def __init__(self, name: str):
        super().__init__(name)
        self.__path__ = []  # a package: submodules import too

    def __getattr__(self, attr: str):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return _Stub(f"{self.__name__}.{attr}")


def _logger_module() -> types.ModuleType:
    m = types.ModuleType("vllm.logger")
    m.init_logger = logging.getLogger  # vLLM's returns a logging.Logger too
    return m


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves ``REAL`` from the wheel and stubs for the rest of ``STUBBED_TOP``,
    under a private prefix so that an installed vllm (if any) is untouched."""

    def __init__(self, wheel: str, prefix: str):
        self.zip = zipfile.ZipFile(wheel)
        self.prefix = prefix

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith(self.prefix):
            return None
        real = fullname[len(self.prefix):]
        if real.split(".")[0] not in STUBBED_TOP:
            return None
        return importlib.util.spec_from_loader(fullname, self, is_package=real not in REAL)

    def create_module(self, spec):
        real = spec.name[len(self.prefix):]
        if real == "vllm.logger":
            return _logger_module()
        if real in REAL:
            return None
        return _StubModule(spec.name)

    def exec_module(self, module):
        real = module.__name__[len(self.prefix):]
        if real not in REAL:
            return
        path = real.replace(".", "/") + ".py"
        source = self.zip.read(path).decode()
        # The modules import each other as `vllm.…`: they are compiled as
        # they are and run with a `vllm` that resolves under the prefix.
        module.__file__ = f"{self.zip.filename}/{path}"
        code = compile(source, module.__file__, "exec")
        exec(code, module.__dict__)


class _Rename(importlib.abc.MetaPathFinder):
    """While loading: `import vllm.x` inside the wheel's code means prefix + vllm.x."""

    def __init__(self, prefix: str):
        self.prefix = prefix

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in STUBBED_TOP:
            spec = importlib.util.find_spec(self.prefix + fullname)
            if spec is not None:
                alias = importlib.util.spec_from_loader(fullname, _Alias(self.prefix + fullname))
                return alias
        return None


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec):
        return importlib.import_module(self.target)

    def exec_module(self, module):
        pass


def cache_dir() -> str:
    return os.environ.get("PAGEALLOC_VLLM_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "pagealloc-vllm"))


def find_wheel(download: bool = True) -> Optional[str]:
    """The vLLM wheel: ``$PAGEALLOC_VLLM_WHEEL``, else one in :func:`cache_dir`,
    else (``download``) fetched there with ``pip download --no-deps``. None
    when it cannot be had."""
    w = os.environ.get("PAGEALLOC_VLLM_WHEEL")
    if w:
        return w if os.path.isfile(w) else None
    d = cache_dir()
    name = f"vllm-{VERSION}-"
    found = [f for f in os.listdir(d) if f.startswith(name) and f.endswith(".whl")] if os.path.isdir(d) else []
    if not found and download:
        os.makedirs(d, exist_ok=True)
        r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", f"vllm=={VERSION}", "-d", d],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return None
        found = [f for f in os.listdir(d) if f.startswith(name) and f.endswith(".whl")]
    return os.path.join(d, found[0]) if found else None


_LOADED: Dict[str, types.SimpleNamespace] = {}


def load(wheel: Optional[str] = None) -> types.SimpleNamespace:
    """vLLM's block-pool modules, from ``wheel`` (default :func:`find_wheel`):
    a namespace with ``block_pool`` and ``kv_cache_utils`` (the modules),
    ``BlockPool`` and ``KVCacheBlock``. Raises ``FileNotFoundError`` when
    there is no wheel."""
    wheel = wheel or find_wheel()
    if wheel is None:
        raise FileNotFoundError(f"no vLLM {VERSION} wheel (pip download --no-deps vllm=={VERSION} failed)")
    if wheel in _LOADED:
        return _LOADED[wheel]
    prefix = f"_pagealloc_vllm{len(_LOADED)}_."
    pkg = types.ModuleType(prefix[:-1])
    pkg.__path__ = []
    sys.modules[prefix[:-1]] = pkg
    finder, rename = _Finder(wheel, prefix), _Rename(prefix)
    sys.meta_path.insert(0, finder)
    sys.meta_path.insert(0, rename)
    try:
        bp = importlib.import_module(prefix + "vllm.v1.core.block_pool")
        ku = importlib.import_module(prefix + "vllm.v1.core.kv_cache_utils")
    finally:
        sys.meta_path.remove(rename)
        # Plain `vllm.…` names were aliased during the load only: drop them
        # so that an installed vllm stays importable.
        for name in [n for n in sys.modules if n.split(".")[0] in STUBBED_TOP]:
            if sys.modules[name].__name__.startswith(prefix):
                del sys.modules[name]
    ns = types.SimpleNamespace(block_pool=bp, kv_cache_utils=ku, BlockPool=bp.BlockPool,
                               KVCacheBlock=ku.KVCacheBlock, wheel=wheel, version=VERSION)
    _LOADED[wheel] = ns
    return ns
