"""One numba cache for every process of a run: compiled kernels are compiled once and loaded by
the driver and every worker (`dataclean.run.kernels` decides when each is compiled).

`use_shared_cache` points numba at a per-user folder (`$XDG_CACHE_HOME/dataclean/numba`, by
default `~/.cache/dataclean/numba`) unless `NUMBA_CACHE_DIR` is already set. It is called in
`dataclean/__init__.py`, before any kernel module is imported, so every process that imports
dataclean uses it; an embedded Ray's workers also inherit it from the driver's environment.
(Numba's default, a `__pycache__` beside each source file, is not writable in a read-only install,
and numba then falls back to a folder of its own: a kernel could be compiled again per install
location.) `kernels_cached` tells whether a run of the same stages compiled into it before, so that
a first run can say it is compiling (and about how long) and a later one need not.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
from pathlib import Path

CACHE_ENV = "NUMBA_CACHE_DIR"


def shared_cache_dir() -> Path:
    """The per-user folder compiled kernels are cached in (see the module docstring)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "dataclean" / "numba"


def use_shared_cache() -> str:
    """Point numba at the shared cache, unless the user chose one (`NUMBA_CACHE_DIR`); returns the
    folder in use. Works whether or not numba is already imported, as long as dataclean's kernel
    modules are not (their cache locations are fixed when they are imported)."""
    folder = os.environ.get(CACHE_ENV) or str(shared_cache_dir())
    os.environ[CACHE_ENV] = folder
    numba = sys.modules.get("numba")
    if numba is not None:  # numba reads the variable once, at its import
        numba.config.CACHE_DIR = folder
    return folder


@functools.cache
def _newest_source() -> int:
    """The newest modification time of dataclean's source files (read once per process)."""
    import dataclean

    package = Path(dataclean.__file__).parent
    return max((path.stat().st_mtime_ns for path in package.rglob("*.py")), default=0)


def _kernels_key(kinds: list[type]) -> str:
    """What a set of compiled kernels depends on: dataclean's version and source files, and the
    stages' types (a changed source file is compiled again by numba: so is the key)."""
    import dataclean

    names = sorted(f"{kind.__module__}.{kind.__qualname__}" for kind in kinds)
    text = "\n".join([dataclean.__version__, str(_newest_source()), sys.version, *names])
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def cache_folder() -> Path:
    """The cache folder in use (`NUMBA_CACHE_DIR`, else `shared_cache_dir`): the compiled kernels,
    and beside them dataclean's notes of what is compiled (and the tokenizer tables of
    `dataclean.lm.unigram`, which reads the same variable), so that emptying it makes a first run."""
    return Path(os.environ.get(CACHE_ENV) or str(shared_cache_dir()))


def _marker(kinds: list[type]) -> Path:
    return cache_folder() / "dataclean-compiled" / _kernels_key(kinds)


def kernels_cached(kinds: list[type]) -> bool:
    """Whether a run of these stage types compiled its kernels into this cache, with this
    dataclean (`mark_kernels_cached`): then this run loads them and says nothing of compiling."""
    try:
        return _marker(kinds).exists()
    except OSError:
        return False


def mark_kernels_cached(kinds: list[type]) -> None:
    """Note that these stage types' kernels are in the cache (a missing note only costs a
    "compiling kernels" line that the next run would not need)."""
    try:
        marker = _marker(kinds)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:
        pass
