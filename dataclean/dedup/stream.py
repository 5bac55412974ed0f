"""Deciding one large component in bounded chunks: the same decisions as `verify.decide`.

A component too large to hold (a site template shared by a million pages; a corpus whose LSH
graph percolates: 1.2M of 3M short documents in one component here) is read in chunks of its
rows in keep order (`ComponentReader`, at most `CHUNK_ROWS` rows and `CHUNK_VALUES` sketch
values each), never whole:

1. Exact copies need no sketch: a member whose exact hash an earlier member of the component
   has follows that first member (`exact_followers`, from the small columns), and is resolved
   after the near pass exactly as `verify.decide` resolves it as it goes.
2. With `verify`, one pass counts every shingle's frequency in the component into the fixed
   counters of `dataclean.dedup.sets` (as `decide` counts them) and writes each chunk's sorted
   sets to local disk (`_SetSpill`), which the next two read back; a second finds the prefix
   tokens two prefixes or more hold, as `prefix_tokens` does (a token only one prefix holds
   can never bring two rows together): in memory up to
   `SHARED_TOKENS` tokens, else spilled by hash into parts of that size on local disk and
   counted part by part. Only those are filed.
3. The decision pass: each member looks up its tokens among the centers filed so far, exactly as
   `verify._decide_kernel` does, with the same caps. What stays in memory between chunks is the
   token table, its entries, and the sketches of the centers filed under at least one token: a
   member that files nothing (its prefix shares nothing, or every token's list is full) can
   never be found again, so its sketch is dropped with its chunk. On template pages that is
   almost every page.

The decisions equal `decide`'s on the same rows (tests: whole against chunked, and the
exhaustive check), so a component's decisions do not depend on its size, its partition or the
chunk size. Its kernels compile (once per kernel cache: about 10 s of CPU here, at a load of 5)
the first time a fit meets a component larger than a chunk; the stage's rehearsal
(`dataclean.run.kernels`) does not, so first runs on ordinary corpora do not pay for them.
"""

# numba kernels compute on numpy scalars, which mypy sees as Any here.
# mypy: disable-error-code="no-any-return"

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import BinaryIO, Protocol

import numba as nb
import numpy as np

from dataclean.dedup.centers import best_center, file_center
from dataclean.dedup.sets import (
    COUNTER_BITS,
    PositionTable,
    count_kernel,
    find_positions,
    position_table,
    prefix_lengths,
    repeated,
    select_kernel,
    slot,
    sorted_sets,
    table_bits,
)

# A chunk: at most this many rows and this many sketch values (4 bytes each: 16 MB).
CHUNK_ROWS = 8192
CHUNK_VALUES = 4 << 20
# Pass 2 holds at most about this many prefix tokens at once (8 bytes each: 64 MB); a
# component with more spills them to local disk, 8 bytes a token.
SHARED_TOKENS = 8 << 20
# Decision kinds (`dataclean.dedup.verify`); the last three are also the reasons' prefixes.
UNIQUE, KEPT, EXACT, NEAR = 0, 1, 2, 3


class ComponentReader(Protocol):
    """Reads rows of a partition by their positions in keep order (`dataclean.dedup.candidates`)."""

    def sketches(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(values, offsets) of these rows' sketches, in the order given."""
        ...

    def keys(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(values, offsets) of these rows' LSH keys, in the order given."""
        ...


@dataclass(frozen=True)
class Chunk:
    """The most rows, and sketch values, read at once."""

    rows: int = CHUNK_ROWS
    values: int = CHUNK_VALUES


DEFAULT_CHUNK = Chunk()


def chunks(lengths: np.ndarray, start: int, end: int, chunk: Chunk) -> Iterator[tuple[int, int]]:
    """(first, last) row ranges covering start:end, each at most `chunk.rows` rows and
    `chunk.values` values by `lengths` (a longer row is a chunk of its own)."""
    first = start
    while first < end:
        last = min(end, first + chunk.rows)
        total = np.cumsum(lengths[first:last])
        fits = int(np.searchsorted(total, chunk.values, side="right"))
        last = first + max(1, fits)
        yield first, last
        first = last


def exact_followers(exact: np.ndarray, earlier: np.ndarray) -> np.ndarray:
    """Per member (rows in keep order), the first member with its exact hash when it follows
    one (`verify.decide`: an earlier output's row never follows), else -1."""
    order = np.argsort(exact, kind="stable")
    ordered = exact[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    leader = order[np.flatnonzero(first)[np.cumsum(first) - 1]]
    follows = np.full(len(exact), -1, dtype=np.int64)
    follows[order] = leader
    follows[(follows == np.arange(len(exact))) | earlier] = -1
    return follows


@dataclass
class _Filed:
    """The near pass's state between chunks: token table, entries, filed centers' sketches."""

    bits: int = 4
    keys: np.ndarray = field(default_factory=lambda: np.empty(16, np.uint64))
    filled: np.ndarray = field(default_factory=lambda: np.zeros(16, np.bool_))
    start: np.ndarray = field(default_factory=lambda: np.empty(16, np.int64))
    length: np.ndarray = field(default_factory=lambda: np.empty(16, np.int64))
    entry_center: np.ndarray = field(default_factory=lambda: np.empty(16, np.int32))
    values: np.ndarray = field(default_factory=lambda: np.empty(16, np.uint32))
    offsets: np.ndarray = field(default_factory=lambda: np.zeros(16, np.int64))
    row: np.ndarray = field(default_factory=lambda: np.empty(16, np.int64))
    seen: np.ndarray = field(default_factory=lambda: np.empty((16, 2), np.int64))
    # centers filed, entry slots used, distinct tokens, similarities computed, members looked
    # up, entries filed
    state: np.ndarray = field(default_factory=lambda: np.zeros(6, np.int64))

    def reserve(self, rows: int, values: int, tokens: int, max_postings: int) -> None:
        """Room for a chunk of `rows` members, `values` sketch values and `tokens` tokens."""
        centers, used, distinct = (int(v) for v in self.state[:3])
        # A filing moves a block to one of at most the power of two at or over `max_postings`
        # slots, and a token's blocks take fewer than 4 slots per entry (`centers.file_center`):
        # both bound the slots used.
        largest = 1 << max(0, (max_postings - 1).bit_length())
        slots = min(used + largest * tokens, 4 * (int(self.state[5]) + tokens))
        self.entry_center = _grown(self.entry_center, slots)
        self.values = _grown(self.values, int(self.offsets[centers]) + values)
        for name in ("offsets", "row", "seen"):
            setattr(self, name, _grown(getattr(self, name), centers + rows + 1))
        bits = table_bits(distinct + tokens)
        if bits > self.bits:
            table = np.empty(1 << bits, np.uint64), np.zeros(1 << bits, np.bool_)
            moved = np.empty(1 << bits, np.int64), np.empty(1 << bits, np.int64)
            _rehash(self.keys, self.filled, self.start, self.length, *table, *moved, bits)
            self.keys, self.filled = table
            self.start, self.length = moved
            self.bits = bits

    def held_bytes(self) -> int:
        """Bytes of the arrays held between chunks."""
        arrays = (self.keys, self.filled, self.start, self.length, self.entry_center)
        more = (self.values, self.offsets, self.row, self.seen)
        return sum(array.nbytes for array in (*arrays, *more))


def _grown(array: np.ndarray, size: int) -> np.ndarray:
    """`array`, or a copy at least twice as long (rows) when it is shorter than `size`."""
    if len(array) >= size:
        return array
    bigger = np.empty((max(size, 2 * len(array)), *array.shape[1:]), dtype=array.dtype)
    bigger[: len(array)] = array
    return bigger


@dataclass
class StreamStats:
    """What deciding a component in chunks held: the most rows and sketch values read at once,
    and the most bytes the filed state reached (`_Filed.held_bytes`)."""

    chunk_rows: int = 0
    chunk_values: int = 0
    filed_bytes: int = 0
    filed_centers: int = 0

    def saw(self, rows: int, values: int) -> None:
        self.chunk_rows = max(self.chunk_rows, rows)
        self.chunk_values = max(self.chunk_values, values)


def decide_component(
    reader: ComponentReader,
    members: np.ndarray,
    earlier: np.ndarray,
    exact_hash: np.ndarray,
    lengths: np.ndarray,
    flags: tuple[bool, bool, bool],
    threshold: float,
    limits: np.ndarray,
    decided: tuple[np.ndarray, np.ndarray, np.ndarray],
    stats: StreamStats,
    chunk: Chunk = DEFAULT_CHUNK,
) -> int:
    """Decide one component whose rows are `members` (positions in the partition, keep order),
    into the partition's kind, target and score (`decided`); returns the similarities computed.

    `earlier`, `exact_hash` and `lengths` (sketch lengths) are per member; `flags` are
    (exact, near, verify) and `limits` (`MAX_POSTINGS`, `MAX_CHECKS`) as in `verify.decide`;
    `stats` records the most read at once and held (`StreamStats`).
    """
    do_exact, do_near, _ = flags
    kind, target, score = decided
    follows = exact_followers(exact_hash, earlier) if do_exact else np.full(len(members), -1, np.int64)
    checks = 0
    if do_near:
        with tempfile.TemporaryDirectory(prefix="dataclean-sets-") as folder:
            checks = _decide_near(
                reader,
                members,
                earlier,
                follows,
                lengths,
                flags,
                threshold,
                limits,
                decided,
                stats,
                chunk,
                folder,
            )
    followers = np.flatnonzero(follows >= 0)
    if len(followers):
        rows, leaders = members[followers], members[follows[followers]]
        near = kind[leaders] == NEAR
        kind[rows] = np.where(near, NEAR, EXACT)
        target[rows] = np.where(near, target[leaders], leaders)
        score[rows] = np.where(near, score[leaders], 1.0)
        kind[leaders[~near]] = KEPT
    return checks


def _decide_near(
    reader: ComponentReader,
    members: np.ndarray,
    earlier: np.ndarray,
    follows: np.ndarray,
    lengths: np.ndarray,
    flags: tuple[bool, bool, bool],
    threshold: float,
    limits: np.ndarray,
    decided: tuple[np.ndarray, np.ndarray, np.ndarray],
    stats: StreamStats,
    chunk: Chunk,
    folder: str,
) -> int:
    """`decide_component`'s near passes (module docstring), the sorted sets spilled to `folder`
    by the first; returns the similarities computed."""
    verify = flags[2]
    kind, target, score = decided
    prepared = None
    if verify:
        spill = _SetSpill(os.path.join(folder, "sets"))
        counters = _count_shingles(reader, members, lengths, stats, chunk, spill)
        # A hash table: a chunk's prefixes are looked up in it (a binary search over the
        # sorted tokens took a fifth of a 1.2M-row component's time).
        prepared = (
            spill,
            counters,
            position_table(_shared_prefixes(spill, lengths, threshold, counters, stats)),
        )
    filed = _Filed()
    for index, (first, last) in enumerate(chunks(lengths, 0, len(members), chunk)):
        rows = members[first:last]
        if prepared is not None:
            spill, counters, shared = prepared
            sets, set_offsets = spill.read(index)
            tokens, token_offsets = _chunk_tokens(sets, set_offsets, threshold, counters, shared)
        else:
            sets, set_offsets = reader.sketches(rows)
            tokens, token_offsets = reader.keys(rows)
        stats.saw(len(rows), len(sets))
        filed.reserve(len(rows), len(sets), len(tokens), int(limits[0]))
        per_row = int(np.diff(token_offsets).max(initial=0))
        found = max(1, per_row * int(limits[0]))
        _stream_kernel(
            rows,
            np.ascontiguousarray(earlier[first:last]),
            follows[first:last] >= 0,
            sets,
            set_offsets,
            tokens,
            token_offsets,
            threshold,
            verify,
            limits,
            kind,
            target,
            score,
            (filed.keys, filed.filled, filed.start, filed.length),
            (filed.entry_center,),
            (filed.values, filed.offsets, filed.row),
            (filed.seen, np.empty(found, np.int64), np.empty(found, np.int64)),
            filed.state,
            filed.bits,
        )
        stats.filed_bytes = max(stats.filed_bytes, filed.held_bytes())
    stats.filed_centers = max(stats.filed_centers, int(filed.state[0]))
    return int(filed.state[3])


class _SetSpill:
    """A component's sorted sets, chunk after chunk, in one file on this machine's local disk
    (4 bytes a shingle and 8 a row): pass 1 reads and sorts each chunk's sketches and writes
    them, passes 2 and 3 read them back, where each read and sorted them again (a fifth of a
    1.2M-row component's time)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.pieces: list[tuple[int, int, int]] = []  # per chunk: byte position, values, offsets
        self._file: BinaryIO | None = open(path, "wb")  # noqa: SIM115 (closed by `read`)
        self._position = 0

    def add(self, sets: np.ndarray, set_offsets: np.ndarray) -> None:
        assert self._file is not None, "a spill is written whole before it is read"
        sets, set_offsets = sets.astype(np.uint32, copy=False), set_offsets.astype(np.int64, copy=False)
        sets.tofile(self._file)
        set_offsets.tofile(self._file)
        self.pieces.append((self._position, len(sets), len(set_offsets)))
        self._position += sets.nbytes + set_offsets.nbytes

    def read(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """Chunk `index`'s (sets, offsets), as `add` got them."""
        if self._file is not None:
            self._file.close()
            self._file = None
        position, values, offsets = self.pieces[index]
        sets = np.fromfile(self.path, np.uint32, values, offset=position)
        return sets, np.fromfile(self.path, np.int64, offsets, offset=position + 4 * values)


def _count_shingles(
    reader: ComponentReader,
    members: np.ndarray,
    lengths: np.ndarray,
    stats: StreamStats,
    chunk: Chunk,
    spill: _SetSpill,
) -> tuple[np.ndarray, int]:
    """Pass 1: the component's shingle frequencies (`dataclean.dedup.sets` counters), and its
    sorted sets into `spill`."""
    bits = COUNTER_BITS
    counters = np.zeros(1 << bits, dtype=np.uint8)
    for first, last in chunks(lengths, 0, len(members), chunk):
        sets, set_offsets = sorted_sets(*reader.sketches(members[first:last]))
        stats.saw(last - first, len(sets))
        count_kernel(sets, set_offsets, counters, bits)
        spill.add(sets, set_offsets)
    return counters, bits


def _prefixes(
    sets: np.ndarray, set_offsets: np.ndarray, threshold: float, counters: tuple[np.ndarray, int]
) -> tuple[np.ndarray, np.ndarray]:
    """A chunk's prefix shingles by the component's complete counters (`sets.prefix_tokens`)."""
    sizes = np.diff(set_offsets)
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(prefix_lengths(sizes, threshold), out=offsets[1:])
    prefixes = np.empty(int(offsets[-1]), dtype=np.uint64)
    counts = np.empty(max(1, int(sizes.max(initial=0))), dtype=np.uint8)
    table, bits = counters
    select_kernel(sets, set_offsets, offsets, prefixes, table, bits, counts, np.empty(256, np.int64))
    return prefixes, offsets


def _shared_prefixes(
    spill: _SetSpill,
    lengths: np.ndarray,
    threshold: float,
    counters: tuple[np.ndarray, int],
    stats: StreamStats,
) -> np.ndarray:
    """Pass 2: the prefix tokens two prefixes or more of the component hold, sorted, exactly as
    `sets.prefix_tokens` keeps them. Held in memory when they are at most `SHARED_TOKENS` (an
    upper bound from the raw lengths); else spilled to this machine's temporary folder by hash,
    in as many parts as keep each part under that, then each part read back, sorted and its
    repeated tokens kept: one pass over the component either way, and a part in memory."""
    parts = max(1, -(-int(prefix_lengths(lengths, threshold).sum()) // SHARED_TOKENS))
    with tempfile.TemporaryDirectory(prefix="dataclean-prefixes-") as folder, ExitStack() as stack:
        paths = [os.path.join(folder, f"{part:05d}") for part in range(parts)]
        spills = [stack.enter_context(open(path, "wb")) for path in paths] if parts > 1 else []
        held = []
        for index in range(len(spill.pieces)):
            sets, set_offsets = spill.read(index)
            stats.saw(len(set_offsets) - 1, len(sets))
            prefixes, _ = _prefixes(sets, set_offsets, threshold, counters)
            if parts == 1:
                held.append(prefixes)
                continue
            part_of = ((prefixes * _GOLDEN) % np.uint64(parts)).astype(np.int64)
            ordered = prefixes[np.argsort(part_of, kind="stable")]
            sizes = np.bincount(part_of, minlength=parts)
            ends = np.cumsum(sizes)
            for part in np.flatnonzero(sizes):
                ordered[ends[part] - sizes[part] : ends[part]].tofile(spills[part])
        if parts == 1:
            return repeated(np.sort(np.concatenate(held))) if held else np.zeros(0, np.uint64)
        for part_file in spills:
            part_file.close()
        shared = [repeated(np.sort(np.fromfile(path, dtype=np.uint64))) for path in paths]
    return np.sort(np.concatenate(shared))


def _chunk_tokens(
    sets: np.ndarray,
    set_offsets: np.ndarray,
    threshold: float,
    counters: tuple[np.ndarray, int],
    shared: PositionTable,
) -> tuple[np.ndarray, np.ndarray]:
    """A chunk's lookup tokens: its prefix shingles that are `shared`, (values, offsets)."""
    prefixes, offsets = _prefixes(sets, set_offsets, threshold, counters)
    keep = find_positions(shared, prefixes) >= 0
    kept_offsets = np.concatenate([[0], np.cumsum(keep)])[offsets].astype(np.int64)
    return prefixes[keep], kept_offsets


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@nb.njit(cache=True, nogil=True)
def _rehash(keys, filled, start, length, new_keys, new_filled, new_start, new_length, bits):  # type: ignore[no-untyped-def]
    """Move the token table into a larger one (arrays allocated by `_Filed.reserve`)."""
    for i in range(len(keys)):
        if filled[i]:
            place = slot(new_keys, new_filled, keys[i], bits)
            new_keys[place], new_filled[place] = keys[i], True
            new_start[place], new_length[place] = start[i], length[i]


@nb.njit(cache=True, nogil=True)
def _stream_kernel(  # type: ignore[no-untyped-def]
    rows,
    earlier,
    follower,
    sets,
    set_offsets,
    tokens,
    token_offsets,
    threshold,
    exact_jaccard,
    limits,
    kind,
    target,
    score,
    table,
    entries,
    centers,
    marks,
    state,
    bits,
):
    """One chunk of `verify._decide_kernel`'s near pass, with its state carried in `state` and the
    filed arrays: a member's sketch is copied after the filed centers' (slot `state[0]`) and kept
    there only if it files a token. Centers are numbered by slot, which is keep order, so ties
    break as in `_decide_kernel`."""
    max_postings, max_checks = limits[0], limits[1]
    token_keys, token_filled, token_length = table[0], table[1], table[3]
    values, offsets, center_row = centers
    seen = marks[0]  # the rest of marks is best_center's scratch
    for i in range(len(rows)):
        if follower[i]:
            continue
        x = state[0]
        start = offsets[x]
        size = set_offsets[i + 1] - set_offsets[i]
        values[start : start + size] = sets[set_offsets[i] : set_offsets[i + 1]]
        offsets[x + 1] = start + size
        seen[x, 0] = -1
        member = state[4]
        state[4] += 1
        if not earlier[i]:
            best, best_similarity, count = best_center(
                tokens,
                token_offsets[i],
                token_offsets[i + 1],
                table,
                entries,
                marks,
                member,
                values,
                offsets,
                x,
                threshold,
                exact_jaccard,
                max_checks,
                bits,
            )
            state[3] += count
            if best >= 0:
                kind[rows[i]], target[rows[i]], score[rows[i]] = NEAR, center_row[best], best_similarity
                if kind[center_row[best]] == UNIQUE:
                    kind[center_row[best]] = KEPT
                continue
        filed = False
        for k in range(token_offsets[i], token_offsets[i + 1]):
            place = slot(token_keys, token_filled, tokens[k], bits)
            if not token_filled[place]:
                token_keys[place], token_filled[place] = tokens[k], True
                token_length[place] = 0
                state[2] += 1
            filed_here, state[1] = file_center(table, entries, place, x, max_postings, state[1])
            if filed_here:
                state[5] += 1
                filed = True
        if filed:
            center_row[x] = rows[i]
            state[0] = x + 1
