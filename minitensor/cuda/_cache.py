"""The disk cache of compiled kernels, shared by both backends' builders
(_nvrtc.py on CUDA, _host_build.py on the emulator): where it lives, the key
of a kernel (its source, options and the library's headers), and atomic writes."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Optional

from .. import _lib


def cache_dir() -> Path:
    """Where compiled kernels are kept ($MINITENSOR_KERNEL_CACHE, else ~/.cache/minitensor/kernels)."""
    env = os.environ.get("MINITENSOR_KERNEL_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "minitensor" / "kernels"


_HEADERS_DIGEST: Optional[str] = None


def _headers_digest() -> str:
    """A digest of the library's headers a kernel may include: editing one
    invalidates the cache."""
    global _HEADERS_DIGEST
    if _HEADERS_DIGEST is None:
        h = hashlib.sha256()
        src = _lib.REPO_ROOT / "src"
        for path in sorted(list(src.glob("*.h")) + list(src.glob("rtc/*.h")) + list(src.glob("emu/*.h"))):
            h.update(path.name.encode())
            h.update(path.read_bytes())
        _HEADERS_DIGEST = h.hexdigest()
    return _HEADERS_DIGEST


def cache_key(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts + (_headers_digest(),):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:40]


def write_atomically(path: Path, data: bytes) -> None:
    """Writes a cache file so that another process never reads half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
