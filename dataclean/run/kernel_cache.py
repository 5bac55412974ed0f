"""One numba cache for every process of a run: compiled kernels are compiled once and loaded by
the driver and every worker (`dataclean.run.kernels` decides when each is compiled).

`use_shared_cache` points numba at a per-user folder (`$XDG_CACHE_HOME/dataclean/numba/KEY`, by
default `~/.cache/dataclean/numba/KEY`) unless `NUMBA_CACHE_DIR` is already set. KEY is a hash of
dataclean's source files' contents (and the small data tables beside them): numba invalidates a
cached kernel when the kernel's own file changes, not when a function it calls in another file
does, so a kernel compiled before such a change would otherwise be loaded after it and run the old
code. Folders of other sources not used for `STALE_DAYS` days are removed when a new one is made.
It is called in
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
import shutil
import sys
import time
from pathlib import Path

CACHE_ENV = "NUMBA_CACHE_DIR"
# the data tables kernels are built from (the language models' tables are cached by their bytes)
_TABLE_FOLDERS = ("clean", "lang", "quality", "split")
STALE_DAYS = 7


def sources_key(package: Path) -> str:
    """A hash of the package's Python sources and data tables, by content (not modification time,
    so a checkout that comes back to the same files finds its kernels again)."""
    digest = hashlib.sha1()
    files = sorted(package.rglob("*.py"))
    for folder in _TABLE_FOLDERS:
        files += sorted(path for path in (package / "data" / folder).rglob("*") if path.is_file())
    for path in files:
        digest.update(str(path.relative_to(package)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@functools.cache
def _own_key() -> str:
    return sources_key(Path(__file__).resolve().parents[1])


def shared_cache_dir() -> Path:
    """The per-user folder compiled kernels are cached in, one per source (module docstring)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "dataclean" / "numba" / _own_key()


def _prune_stale(folder: Path) -> None:
    """Remove the folders of other sources beside `folder` not used for `STALE_DAYS` days."""
    cutoff = time.time() - STALE_DAYS * 86400
    for other in folder.parent.iterdir():
        if other != folder and other.is_dir() and other.stat().st_mtime < cutoff:
            shutil.rmtree(other, ignore_errors=True)


def _mark_used(folder: Path) -> None:
    """Make the shared folder (pruning stale ones the first time) and note its use by its mtime."""
    try:
        if not folder.exists():
            folder.mkdir(parents=True, exist_ok=True)
            _prune_stale(folder)
        os.utime(folder)
    except OSError:
        pass  # numba reports an unwritable cache itself


def use_shared_cache() -> str:
    """Point numba at the shared cache, unless the user chose one (`NUMBA_CACHE_DIR`); returns the
    folder in use. Works whether or not numba is already imported, as long as dataclean's kernel
    modules are not (their cache locations are fixed when they are imported)."""
    folder = os.environ.get(CACHE_ENV)
    if not folder:
        shared = shared_cache_dir()
        _mark_used(shared)
        folder = str(shared)
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
