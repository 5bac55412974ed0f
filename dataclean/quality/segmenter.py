"""Chinese word segmentation as jieba 0.42.1 cuts (its default mode), compiled with numba.

FineWeb-2 counts Chinese words with datatrove's Chinese tokenizer, spaCy's `zh` with the jieba
segmenter. The quality rules need words where Chinese is written without spaces (n-gram
repetition, word counts and lengths); jieba in Python reads about 0.1-0.5 MB/s, 20-100 times
slower than the stage's compiled pass, so this is jieba's algorithm over a code-point buffer:
- a run of Han characters (U+4E00-U+9FD5, jieba's `re_han` range) is cut by jieba's dictionary
  (`jieba/dict.txt`, 349,046 words with frequencies): every dictionary word starting at each
  character (the DAG), then the most probable path from the end (`calc`: log frequency minus the
  log of the total, ties to the longer word);
- consecutive single characters on that path that are not a dictionary word together are cut by
  jieba's hidden Markov model (`jieba.finalseg`: B/M/E/S states, its start, transition and
  emission log probabilities; Viterbi with jieba's tie-breaking);
- everything outside such runs (Latin words, digits, punctuation) is left to the caller.
jieba cuts ASCII letters, digits and `+#&._%-` next to Han characters in the same block, where
they are single characters on the path that join the Han ones before the dictionary test (so
`可达30` goes to the HMM); a run's edges do the same here. What differs: the few dictionary words
that mix Han and Latin (`B超`, `T恤`). The agreement with jieba
on real text is measured by tests (`tests/quality/test_segmenter.py`).

The dictionary and model come from the installed `jieba` package (MIT license); the hash table
built from them (about 6 s) is kept in the kernel cache folder, one file per table, which a
later process maps read-only in milliseconds (read whole, the 64 MB took 0.8 s of every process
that met Han text). Tables are built only when a batch holds Han text.
"""

# numba kernels compute on numpy scalars, which mypy sees as Any here.
# mypy: disable-error-code="no-any-return"

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import numba
import numpy as np

from dataclean.errors import ConfigError
from dataclean.jit import helper

FIRST, LAST = 0x4E00, 0x9FD5  # jieba's re_han range
_B = np.uint64(0x9E3779B97F4A7C15)
_MIX = np.uint64(0xFF51AFD7ED558CCD)
MIN_FLOAT = -3.14e100  # jieba.finalseg's missing-probability value
PREFIX_ONLY = np.nan  # a dictionary prefix that is not a word itself (jieba's frequency 0)
# B, E, M, S: jieba's states, in the order its ties are broken (by the state's letter).
_PREVIOUS = np.array([[1, 3], [0, 2], [2, 0], [3, 1]], np.int64)  # B: E,S  E: B,M  M: M,B  S: S,E
_NAMES = ("keys", "values", "logtotal", "start", "trans", "emit")
_VERSION = 2  # 2: one .npy file per table, mapped read-only (1: one .npz, read whole)

Tables = tuple[Any, ...]


@helper
def _key(h, length):  # type: ignore[no-untyped-def]
    return h ^ (np.uint64(length) * _MIX)


@helper
def _slot(keys, key):  # type: ignore[no-untyped-def]
    mask = len(keys) - 1
    i = np.int64((key ^ (key >> np.uint64(29))) & np.uint64(mask))
    while keys[i] != 0 and keys[i] != key:
        i = (i + 1) & mask
    return i


@numba.njit(cache=True, nogil=True)
def _build(cps, offsets, logs, keys, values):  # type: ignore[no-untyped-def]
    """Insert every word (`cps[offsets[w]:offsets[w+1]]`, log frequency `logs[w]`, NaN for 0) and
    its prefixes (NaN unless a word) into the open-addressing table `keys`/`values`."""
    for w in range(len(offsets) - 1):
        h = np.uint64(0)
        for i in range(offsets[w], offsets[w + 1]):
            h = h * _B + np.uint64(cps[i])
            length = i - offsets[w] + 1
            slot = _slot(keys, _key(h, length))
            if keys[slot] == 0:
                keys[slot] = _key(h, length)
                values[slot] = np.nan
            if i == offsets[w + 1] - 1 and not np.isnan(logs[w]):
                values[slot] = logs[w]


def _dictionary() -> bytes:
    """jieba's dictionary file, found without importing jieba (0.3 s a process; only building
    the tables needs its model, `_model`)."""
    spec = importlib.util.find_spec("jieba")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "Chinese word segmentation needs the jieba package (its dictionary): pip install jieba"
        )
    return (Path(next(iter(spec.submodule_search_locations))) / "dict.txt").read_bytes()


def _model() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from jieba.finalseg import prob_emit, prob_start, prob_trans

    order = "BEMS"
    start = np.array([prob_start.P[s] for s in order], np.float64)
    trans = np.array([[prob_trans.P[a].get(b, MIN_FLOAT) for b in order] for a in order], np.float64)
    emit = np.full((4, LAST - FIRST + 1), MIN_FLOAT, np.float64)
    for row, state in enumerate(order):
        for char, value in prob_emit.P[state].items():
            if FIRST <= ord(char) <= LAST:
                emit[row, ord(char) - FIRST] = value
    return start, trans, emit


def _build_tables(content: bytes) -> dict[str, np.ndarray]:
    words: list[str] = []
    logs: list[float] = []
    total = 0
    for line in content.decode("utf-8").splitlines():
        parts = line.split(" ")
        if len(parts) < 2:
            continue
        frequency = int(parts[1])
        total += frequency
        words.append(parts[0])
        logs.append(math.log(frequency) if frequency else math.nan)
    cps = np.array([ord(ch) for word in words for ch in word], np.uint32)
    offsets = np.zeros(len(words) + 1, np.int64)
    offsets[1:] = np.cumsum([len(word) for word in words])
    size = 1 << int(4 * len(cps)).bit_length()
    keys = np.zeros(size, np.uint64)
    values = np.full(size, np.nan, np.float64)
    _build(cps, offsets, np.array(logs, np.float64), keys, values)
    start, trans, emit = _model()
    logtotal = np.array([math.log(total)], np.float64)
    return dict(zip(_NAMES, (keys, values, logtotal, start, trans, emit), strict=True))


def _cache_path(content: bytes) -> Path | None:
    """Where the tables of this dictionary are kept: a folder in the kernel cache folder
    (`NUMBA_CACHE_DIR`, which importing dataclean sets), named by the dictionary's hash and the
    tables' version, one `.npy` file per table."""
    folder = os.environ.get("NUMBA_CACHE_DIR")
    if not folder:
        return None
    digest = hashlib.sha1(content).hexdigest()[:20]
    return Path(folder) / "dataclean-segmenter" / f"{digest}-v{_VERSION}"


def _load(path: Path) -> dict[str, np.ndarray] | None:
    """The tables, mapped from their files read-only (the 64 MB hash table took 0.8 s to read
    whole in every process that met Han text; mapped, the pages a batch touches are read)."""
    try:
        return {name: np.load(path / f"{name}.npy", mmap_mode="r").view(np.ndarray) for name in _NAMES}
    except (OSError, ValueError):
        return None


def _save(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Into a uniquely named temporary folder, then renamed: a reader never sees half the tables;
    a folder that cannot be written (or that another process wrote first) is left as it is."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = Path(tempfile.mkdtemp(dir=path.parent, suffix=".tmp"))
    except OSError:
        return
    try:
        for name, array in arrays.items():
            np.save(temporary / f"{name}.npy", array)
        os.replace(temporary, path)
    except OSError:
        shutil.rmtree(temporary, ignore_errors=True)


def _read_only(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The tables as the kernels always get them, read-only: numba compiles a kernel apart for
    read-only and writable arrays, and the tables come mapped read-only from the cache."""
    for array in arrays.values():
        array.flags.writeable = False
    return arrays


@lru_cache(maxsize=1)
def segmenter_tables() -> Tables:
    """(hash keys, log frequencies (NaN: a prefix only), log of the total frequency, start,
    transition and emission log probabilities of the HMM), read-only: built once, kept in the
    kernel cache folder, mapped by every later process."""
    content = _dictionary()
    path = _cache_path(content)
    arrays = _load(path) if path is not None else None
    if arrays is None:
        arrays = _read_only(_build_tables(content))
        if path is not None:
            _save(path, arrays)
    return (
        arrays["keys"],
        arrays["values"],
        float(arrays["logtotal"][0]),
        arrays["start"],
        arrays["trans"],
        arrays["emit"],
    )


@lru_cache(maxsize=1)
def no_segmenter() -> Tables:
    """Tables of the same types that segment nothing (a batch without Han text), read-only as
    `segmenter_tables`' are (one compiled kernel for both)."""
    empty = _read_only(
        {
            "keys": np.zeros(1, np.uint64),
            "values": np.zeros(1, np.float64),
            "start": np.zeros(4, np.float64),
            "trans": np.zeros((4, 4), np.float64),
            "emit": np.zeros((4, 1), np.float64),
        }
    )
    return (empty["keys"], empty["values"], 0.0, empty["start"], empty["trans"], empty["emit"])


@helper
def segmentable(c):  # type: ignore[no-untyped-def]
    return FIRST <= c <= LAST


@helper
def _lookup(keys, values, h, length):  # type: ignore[no-untyped-def]
    """The table value of a fragment: -inf when absent, NaN for a prefix only, else its log frequency."""
    key = _key(h, length)
    slot = _slot(keys, key)
    return values[slot] if keys[slot] == key else -np.inf


@helper
def _hmm(cps, a, b, tables, out, n, probs, back):  # type: ignore[no-untyped-def]
    """jieba.finalseg's Viterbi over `cps[a:b]` (Han characters), its words appended to `out`."""
    start, trans, emit = tables[3], tables[4], tables[5]
    for y in range(4):
        probs[0, y] = start[y] + emit[y, cps[a] - FIRST]
    for t in range(1, b - a):
        for y in range(4):
            em = emit[y, cps[a + t] - FIRST]
            y0 = _PREVIOUS[y, 0]
            best = probs[t - 1, y0] + trans[y0, y] + em
            best_state = y0
            y1 = _PREVIOUS[y, 1]
            other = probs[t - 1, y1] + trans[y1, y] + em
            if other > best or (other == best and y1 > best_state):
                best, best_state = other, y1
            probs[t, y] = best
            back[t, y] = best_state
    last = b - a - 1
    state = 3 if probs[last, 3] >= probs[last, 1] else 1  # max over E, S: ties to S
    for t in range(last, -1, -1):  # back[t, 3] takes the decoded state once row t is read
        previous = back[t, state] if t > 0 else 0
        back[t, 3] = state
        state = previous
    begin = nexti = 0
    for t in range(b - a):
        pos = back[t, 3]
        if pos == 0:
            begin = t
        elif pos == 1:
            n = _emit(out, n, a + begin, a + t + 1)
            nexti = t + 1
        elif pos == 3:
            n = _emit(out, n, a + t, a + t + 1)
            nexti = t + 1
    if nexti < b - a:
        n = _emit(out, n, a + nexti, b)
    return n


@helper
def _emit(out, n, s, e):  # type: ignore[no-untyped-def]
    out[n, 0] = s
    out[n, 1] = e
    return n + 1


@helper
def _flush(cps, a, b, tables, out, n, probs, back, joined):  # type: ignore[no-untyped-def]
    """jieba's handling of a run of single characters on the best path (its `buf`); `joined`:
    it continues into the letters or digits next to the Han run (jieba's block holds them too),
    so it is no dictionary word and the HMM cuts its Han part."""
    if joined:
        return _hmm(cps, a, b, tables, out, n, probs, back)
    if b - a == 1:
        return _emit(out, n, a, b)
    h = np.uint64(0)
    for i in range(a, b):
        h = h * _B + np.uint64(cps[i])
    value = _lookup(tables[0], tables[1], h, b - a)
    if value == -np.inf or np.isnan(value):  # not a word: the HMM cuts it
        return _hmm(cps, a, b, tables, out, n, probs, back)
    for i in range(a, b):
        n = _emit(out, n, i, i + 1)
    return n


@helper
def block_char(c):  # type: ignore[no-untyped-def]
    """A character jieba's `re_han_default` block holds besides Han: ASCII letters, digits, +#&._%-."""
    return (
        (48 <= c <= 57) or (65 <= c <= 90) or (97 <= c <= 122)
        or c == 43 or c == 35 or c == 38 or c == 46 or c == 95 or c == 37 or c == 45
    )  # fmt: skip


@helper
def segment_run(cps, s, e, tables, out, n, route_p, route_x, probs, back):  # type: ignore[no-untyped-def]
    """jieba's words of the Han run `cps[s:e]` appended to `out` (rows of start, end) from row
    `n`; returns the new row count. `route_p`, `route_x`, `probs`, `back` are scratch (rows >=
    e - s + 1). The characters around the run (`cps[s - 1]`, `cps[e]`) decide whether jieba's
    block went on past it."""
    left_open = s > 0 and block_char(cps[s - 1])
    right_open = e < len(cps) and block_char(cps[e])
    keys, values, logtotal = tables[0], tables[1], tables[2]
    size = e - s
    route_p[size] = 0.0
    route_x[size] = 0
    for idx in range(size - 1, -1, -1):
        best_p = -np.inf
        best_x = -1
        h = np.uint64(0)
        i = idx
        while i < size:
            h = h * _B + np.uint64(cps[s + i])
            value = _lookup(keys, values, h, i - idx + 1)
            if value == -np.inf:
                break
            if not np.isnan(value):
                p = value - logtotal + route_p[i + 1]
                if p > best_p or (p == best_p and i > best_x):
                    best_p, best_x = p, i
            i += 1
        if best_x < 0:  # no word starts here: the character alone, frequency 1 (log 0)
            best_x = idx
            best_p = 0.0 - logtotal + route_p[idx + 1]
        route_p[idx] = best_p
        route_x[idx] = best_x
    x = 0
    buf = -1
    while x < size:
        y = route_x[x] + 1
        if y - x == 1:
            if buf < 0:
                buf = x
        else:
            if buf >= 0:
                n = _flush(cps, s + buf, s + x, tables, out, n, probs, back, buf == 0 and left_open)
                buf = -1
            n = _emit(out, n, s + x, s + y)
        x = y
    if buf >= 0:
        joined = right_open or (buf == 0 and left_open)
        n = _flush(cps, s + buf, s + size, tables, out, n, probs, back, joined)
    return n


@numba.njit(cache=True, nogil=True)
def _segment_kernel(cps, tables, out, route_p, route_x, probs, back):  # type: ignore[no-untyped-def]
    n = np.int64(0)
    i = 0
    while i < len(cps):
        if segmentable(cps[i]):
            j = i
            while j < len(cps) and segmentable(cps[j]):
                j += 1
            n = segment_run(cps, i, j, tables, out, n, route_p, route_x, probs, back)
            i = j
        else:
            n = _emit(out, n, i, i + 1)
            i += 1
    return n


def segment(text: str) -> list[str]:
    """jieba's words of the Han runs of `text`; every other character is a word of its own (for
    tests: the quality pass cuts the rest with its own tokenizer)."""
    cps = np.array([ord(ch) for ch in text], np.uint32)
    size = max(1, len(cps) + 1)
    out = np.empty((size, 2), np.int64)
    n = _segment_kernel(
        cps, segmenter_tables(), out, np.empty(size, np.float64), np.empty(size, np.int64),
        np.empty((size, 4), np.float64), np.empty((size, 4), np.int64),
    )  # fmt: skip
    return [text[int(a) : int(b)] for a, b in out[:n]]
