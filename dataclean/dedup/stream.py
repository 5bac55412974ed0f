"""Deciding one large component in bounded chunks: the same decisions as `verify.decide`.

A component too large to hold (a site template shared by a million pages; a corpus whose LSH
graph percolates: 1.2M of 3M short documents in one component here) is read in chunks of its
rows in keep order (`ComponentReader`, at most `CHUNK_ROWS` rows and `CHUNK_VALUES` sketch
values each), never whole:

1. Exact copies need no sketch: a member whose exact hash an earlier member of the component
   has follows that first member (`exact_followers`, from the small columns), and is resolved
   after the near pass exactly as `verify.decide` resolves it as it goes.
2. One pass reads each chunk's sketches and writes them to local disk (`_SetSpill`: every
   member's set one after the other, and where each starts), which the next passes read back;
   with `verify` it sorts them into sets first and counts every shingle's frequency in the
   component into the fixed counters of `dataclean.dedup.sets` (as `decide` counts them). A
   second (with `verify`) finds the prefix tokens two prefixes or more hold, as
   `prefix_tokens` does (a token only one prefix holds can never bring two rows together): in
   memory up to `SHARED_TOKENS` tokens, else spilled by hash into parts of that size on
   local disk and counted part by part. Only those are filed.
3. The decision pass: each member looks up its tokens among the centers filed so far, exactly as
   `verify._decide_kernel` does, with the same caps. What stays in memory between chunks is the
   token table and its entries (member numbers): no set, nothing else per member. A member is
   compared with its centers' sets where the spill holds them, mapped into memory (`_Mapped`):
   those pages are the operating system's file cache, which it can take back and read again, so
   what a component's task must hold does not grow with its centers' sets (at 3M short
   documents, 1.2M rows in one component, they took 200 of the 426 MB its filed state held).

The decisions equal `decide`'s on the same rows (tests: whole against chunked, and the
exhaustive check), so a component's decisions do not depend on its size, its partition or the
chunk size. Its kernels compile (once per kernel cache: about 10 s of CPU here, at a load of 5)
the first time a fit meets a component larger than a chunk; the stage's rehearsal
(`dataclean.run.kernels`) does not, so first runs on ordinary corpora do not pay for them.
"""

# numba kernels compute on numpy scalars, which mypy sees as Any here.
# mypy: disable-error-code="no-any-return"

from __future__ import annotations

import mmap
import os
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Protocol

import numba as nb
import numpy as np

from dataclean.dedup.centers import (
    EMPTY,
    best_center,
    claim_slot,
    file_center,
    seen_table,
    token_slot,
    token_table,
)
from dataclean.dedup.sets import (
    COUNTER_BITS,
    GOLDEN,
    PositionTable,
    count_kernel,
    find_positions,
    position_table,
    prefix_lengths,
    repeated,
    select_kernel,
    set_bitmaps,
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
    """The near pass's state between chunks: the token table and its entries (member numbers).
    (It also held a mark and a shared-token count per member for `centers.best_center`, 16 bytes
    a member: a member's centers are now counted in a small table of its own.)"""

    bits: int = 4
    table: np.ndarray = field(default_factory=lambda: token_table(4))
    entry_center: np.ndarray = field(default_factory=lambda: np.empty(16, np.int32))
    # centers filed, entry slots used, distinct tokens, similarities computed, members looked
    # up, entries filed
    state: np.ndarray = field(default_factory=lambda: np.zeros(6, np.int64))

    def reserve(self, tokens: int, max_postings: int) -> None:
        """Room for a chunk's `tokens` tokens."""
        used, distinct = int(self.state[1]), int(self.state[2])
        # A filing moves a block to one of at most the power of two at or over `max_postings`
        # slots, and a token's blocks take fewer than 4 slots per entry (`centers.file_center`):
        # both bound the slots used.
        largest = 1 << max(0, (max_postings - 1).bit_length())
        slots = min(used + largest * tokens, 4 * (int(self.state[5]) + tokens))
        self.entry_center = _grown(self.entry_center, slots, used)
        bits = table_bits(distinct + tokens)
        if bits > self.bits:
            table = token_table(bits)
            _rehash(self.table, table, bits)
            self.table, self.bits = table, bits

    def held_bytes(self) -> int:
        """Bytes of the arrays held between chunks."""
        arrays = (self.table, self.entry_center)
        return sum(array.nbytes for array in arrays)


def _grown(array: np.ndarray, size: int, used: int) -> np.ndarray:
    """`array`, or a copy of its first `used` entries in one at least twice as long when it is
    shorter than `size` (only what is used is copied: copying the rest touched pages of both
    that were never written, the peak of a large component's task)."""
    if len(array) >= size:
        return array
    bigger = np.empty(max(size, 2 * len(array)), dtype=array.dtype)
    bigger[:used] = array[:used]
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
    """`decide_component`'s near passes (module docstring), the sets spilled to `folder` by the
    first; returns the similarities computed."""
    verify = flags[2]
    kind, target, score = decided
    spill = _SetSpill(folder)
    counters = _spill_sets(reader, members, lengths, stats, chunk, spill, verify)
    shared = None
    if verify:
        # A hash table: a chunk's prefixes are looked up in it (a binary search over the
        # sorted tokens took a fifth of a 1.2M-row component's time).
        shared = position_table(_shared_prefixes(spill, lengths, threshold, counters, stats))
    filed = _Filed()
    ranges = spill.ranges()  # closes the spill: written whole

    def lookup_tokens(index: int) -> tuple[np.ndarray, np.ndarray]:
        """Chunk `index`'s lookup tokens: its shared prefix shingles, or its LSH keys."""
        if shared is None:
            first, last = ranges[index]
            return reader.keys(members[first:last])
        sets, set_offsets = spill.read(index)
        return _chunk_tokens(sets, set_offsets, threshold, counters, shared)

    with (
        _Mapped(spill.values_path, np.uint32) as values,
        _Mapped(spill.offsets_path, np.int64) as offsets,
        _Mapped(spill.bitmaps_path, np.uint64) as bitmaps,
    ):
        for index, (first, last) in enumerate(ranges):
            tokens, token_offsets = lookup_tokens(index)
            filed.reserve(len(tokens), int(limits[0]))
            per_row = int(np.diff(token_offsets).max(initial=0))
            found = max(1, per_row * int(limits[0]))
            scratch = np.empty(found, np.int64), np.empty(found, np.int64), seen_table(found)
            _stream_kernel(
                members,
                first,
                np.ascontiguousarray(earlier[first:last]),
                follows[first:last] >= 0,
                values.array,
                offsets.array,
                bitmaps.array.reshape(-1, 2),
                tokens,
                token_offsets,
                threshold,
                verify,
                limits,
                kind,
                target,
                score,
                filed.table,
                (filed.entry_center,),
                scratch,
                filed.state,
                filed.bits,
            )
            stats.filed_bytes = max(stats.filed_bytes, filed.held_bytes())
    stats.filed_centers = max(stats.filed_centers, int(filed.state[0]))
    return int(filed.state[3])


class _SetSpill:
    """A component's sets, chunk after chunk, in files in a folder on this machine's local
    disk: `values` (4 bytes a value, every member's set one after the other), `offsets` (8
    bytes a member: where its set starts in `values`, and the end) and, with exact Jaccard,
    `bitmaps` (16 bytes a member, `sets.set_bitmaps`). Pass 1 writes them, pass 2
    reads them back a chunk at a time, pass 3 too and maps them whole (`_Mapped`) to compare a
    member with any earlier one. Each pass used to read and sort the sketches again (a fifth of
    a 1.2M-row component's time), and pass 3 to keep its centers' sets in memory."""

    def __init__(self, folder: str) -> None:
        self.values_path = os.path.join(folder, "values")
        self.offsets_path = os.path.join(folder, "offsets")
        self.bitmaps_path = os.path.join(folder, "bitmaps")
        # Per chunk: first value, values, first member, members.
        self.pieces: list[tuple[int, int, int, int]] = []
        self._files: tuple[BinaryIO, BinaryIO, BinaryIO] | None = (
            open(self.values_path, "wb"),  # noqa: SIM115 (closed by `_close`)
            open(self.offsets_path, "wb"),  # noqa: SIM115
            open(self.bitmaps_path, "wb"),  # noqa: SIM115
        )
        self._values = 0
        self._members = 0

    def add(self, sets: np.ndarray, set_offsets: np.ndarray, bitmaps: np.ndarray | None = None) -> None:
        """Append a chunk's sets (values, offsets from 0), and their bitmaps if given (given for
        every chunk or none)."""
        assert self._files is not None, "a spill is written whole before it is read"
        sets.astype(np.uint32, copy=False).tofile(self._files[0])
        (set_offsets[:-1].astype(np.int64) + self._values).tofile(self._files[1])
        if bitmaps is not None:
            bitmaps.tofile(self._files[2])
        members = len(set_offsets) - 1
        self.pieces.append((self._values, len(sets), self._members, members))
        self._values += len(sets)
        self._members += members

    def ranges(self) -> list[tuple[int, int]]:
        """Each chunk's (first, last) members."""
        self._close()
        return [(first, first + members) for _, _, first, members in self.pieces]

    def read(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """Chunk `index`'s (sets, offsets from 0), as `add` got them."""
        self._close()
        position, values, first, members = self.pieces[index]
        sets = np.fromfile(self.values_path, np.uint32, values, offset=4 * position)
        offsets = np.fromfile(self.offsets_path, np.int64, members + 1, offset=8 * first)
        return sets, offsets - position

    def _close(self) -> None:
        if self._files is not None:
            np.array([self._values], np.int64).tofile(self._files[1])  # the last set's end
            for file in self._files:
                file.close()
            self._files = None


class _Mapped:
    """A file of `dtype` values mapped into memory (copy on write, never written) as `array`.
    Its pages are the operating system's file cache, not this process's own memory: they count
    in its resident size (as file pages, `RssFile`) once touched, and the system takes them back
    when it needs the memory and reads them again from the disk when touched again. (Letting
    them go after each chunk, `madvise(MADV_DONTNEED)`, did not lower the peak: a member's
    centers are anywhere in the component, and a touch maps the file cache's whole folio, up to
    2 MB here, so a chunk maps most of the file.)"""

    def __init__(self, path: str, dtype: type) -> None:
        self._file = open(path, "rb")  # noqa: SIM115 (closed by `__exit__`)
        size = os.path.getsize(path)
        self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_COPY) if size else None
        self.array: np.ndarray = (
            np.frombuffer(self._map, dtype) if self._map is not None else np.zeros(0, dtype)
        )

    def __enter__(self) -> _Mapped:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.array = np.zeros(0, self.array.dtype)  # the map closes only once no array uses it
        if self._map is not None:
            self._map.close()
        self._file.close()


def _spill_sets(
    reader: ComponentReader,
    members: np.ndarray,
    lengths: np.ndarray,
    stats: StreamStats,
    chunk: Chunk,
    spill: _SetSpill,
    verify: bool,
) -> tuple[np.ndarray, int]:
    """Pass 1: every chunk's sketches into `spill`; with `verify`, sorted into sets and their
    shingles counted: the component's frequencies (`dataclean.dedup.sets` counters)."""
    bits = COUNTER_BITS
    counters = np.zeros(1 << bits if verify else 1, dtype=np.uint8)
    for first, last in chunks(lengths, 0, len(members), chunk):
        sets, set_offsets = reader.sketches(members[first:last])
        stats.saw(last - first, len(sets))
        bitmaps = None
        if verify:
            sets, set_offsets = sorted_sets(sets, set_offsets)
            bitmaps = set_bitmaps(sets, set_offsets)
            count_kernel(sets, set_offsets, counters, bits)
        spill.add(sets, set_offsets, bitmaps)
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
        held: list[np.ndarray] = []
        for index in range(len(spill.pieces)):
            sets, set_offsets = spill.read(index)
            stats.saw(len(set_offsets) - 1, len(sets))
            prefixes, _ = _prefixes(sets, set_offsets, threshold, counters)
            if parts == 1:
                held.append(prefixes)
                continue
            part_of = ((prefixes * GOLDEN) % np.uint64(parts)).astype(np.int64)
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


@nb.njit(cache=True, nogil=True)
def _rehash(table, new_table, bits):  # type: ignore[no-untyped-def]
    """Move the token table into a larger one (allocated by `_Filed.reserve`)."""
    for i in range(len(table)):
        if table[i, 1] != EMPTY:
            place = token_slot(new_table, table[i, 0], bits)
            new_table[place, 0], new_table[place, 1] = table[i, 0], table[i, 1]


@nb.njit(cache=True, nogil=True)
def _stream_kernel(  # type: ignore[no-untyped-def]
    members,
    first,
    earlier,
    follower,
    values,
    offsets,
    bitmaps,
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
    marks,
    state,
    bits,
):
    """One chunk (the component's members first, first + 1, ...) of `verify._decide_kernel`'s
    near pass, with its state carried in `state` and the filed arrays. Centers are numbered by
    member, which is keep order, so ties break as in `_decide_kernel`; every member's set is
    `values[offsets[m]:offsets[m + 1]]` (the spill, mapped)."""
    max_postings, max_checks = limits[0], limits[1]
    for i in range(len(earlier)):
        if follower[i]:
            continue
        x = first + i
        row = members[x]
        mark = state[4]
        state[4] += 1
        if not earlier[i]:
            best, best_similarity, count = best_center(
                tokens,
                token_offsets[i],
                token_offsets[i + 1],
                table,
                entries,
                marks,
                mark,
                values,
                offsets,
                bitmaps,
                x,
                threshold,
                exact_jaccard,
                max_checks,
                bits,
            )
            state[3] += count
            if best >= 0:
                kind[row], target[row], score[row] = NEAR, members[best], best_similarity
                if kind[members[best]] == UNIQUE:
                    kind[members[best]] = KEPT
                continue
        filed = False
        for k in range(token_offsets[i], token_offsets[i + 1]):
            place = token_slot(table, tokens[k], bits)
            if claim_slot(table, place, tokens[k]):
                state[2] += 1
            filed_here, state[1] = file_center(table, entries, place, x, max_postings, state[1])
            if filed_here:
                state[5] += 1
                filed = True
        if filed:
            state[0] += 1
