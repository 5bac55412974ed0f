"""Arrays built from a model file, kept between processes in the kernel cache folder.

Building a model's lookup tables in Python takes a few tenths of a second to a few seconds (a
SentencePiece trie, an ARPA file's n-gram table), in every process that scores text, at every
run. They are kept in the folder of the compiled kernels, `NUMBA_CACHE_DIR`, which importing
dataclean sets (`dataclean.run.kernel_cache`; by default `~/.cache/dataclean/numba/KEY/`), under
`dataclean-lm-tables/`, one `.npz` per model file, named by the hash of the file's bytes and the
tables' format version: a later process loads them in milliseconds. A cache that cannot be read
or written is rebuilt or skipped, never an error.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import numpy as np

FOLDER = "dataclean-lm-tables"


def cache_path(content: bytes, kind: str, version: int) -> Path | None:
    """Where the tables of a model file with these bytes are kept, or None without a cache folder.

    `kind` names the table builder (so two builders never share a file), `version` its layout."""
    # kernel_cache.CACHE_ENV, read here by name: this layer does not import the run layer.
    folder = os.environ.get("NUMBA_CACHE_DIR")  # set when dataclean is imported
    if not folder:
        return None
    digest = hashlib.sha1(content).hexdigest()[:20]
    suffix = "" if kind == "unigram" else f"-{kind}"  # the unigram tables' names predate `kind`
    return Path(folder) / FOLDER / f"{digest}{suffix}-v{version}.npz"


def load_arrays(path: Path, names: tuple[str, ...]) -> dict[str, np.ndarray] | None:
    """The named arrays of a cached file, or None if it is missing, unreadable or incomplete."""
    try:
        with np.load(path) as stored:
            return {name: stored[name] for name in names}
    except (OSError, KeyError, ValueError):
        return None


def save_arrays(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write the arrays under a temporary name, then rename: a process reading never sees half.
    The name is unique (`mkstemp`, not `io.files.atomic_output`'s fixed one): on a first run the
    driver and a worker build the same model's tables at the same time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(handle, "wb") as file:
            np.savez(file, **arrays)  # type: ignore[arg-type]
        os.replace(temporary, path)
    except OSError:
        pass  # a read-only home: the next process builds them again
