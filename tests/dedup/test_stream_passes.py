"""The large component's pass 2 and the decision's scratch tables and bitmaps.

Truth: the shared prefix tokens computed the plain way (every chunk's prefixes, one sort,
the repeated ones) and Python's set Jaccard; the decisions themselves are checked against
`decide` and the exhaustive check in `test_stream_decisions`.
"""

from __future__ import annotations

from pathlib import Path

import numba
import numpy as np
import pytest

from dataclean.dedup import stream
from dataclean.dedup.centers import seen_table
from dataclean.dedup.sets import count_kernel, may_reach, prefix_lengths, repeated, set_bitmaps, sorted_sets
from dataclean.dedup.stream import StreamStats


def _sets(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted sets of 20-60 shingles drawn from a small pool, so prefixes repeat."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(20, 60, rows)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    values = rng.integers(0, 5_000, int(offsets[-1])).astype(np.uint32)
    return sorted_sets(values, offsets)


@pytest.mark.parametrize("shared_tokens", [10**9, 300])
def test_shared_prefixes_held_or_in_parts_equal_one_sort(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared_tokens: int
) -> None:
    # 10**9: held in memory; 300: spilled by hash into parts, counted part by part.
    monkeypatch.setattr(stream, "SHARED_TOKENS", shared_tokens)
    spill = stream._SetSpill(str(tmp_path))
    counters = np.zeros(1 << 20, np.uint8), 20
    every = []
    pieces = [_sets(rows, seed) for seed, rows in enumerate((50, 7, 120, 1, 64))]
    for sets, offsets in pieces:
        count_kernel(sets, offsets, *counters)
        spill.add(sets, offsets)
    spill.ranges()
    for sets, offsets in pieces:
        every.append(stream._prefixes(sets, offsets, 0.7, counters)[0])
    lengths = np.concatenate([np.diff(offsets) for _, offsets in pieces])
    assert prefix_lengths(lengths, 0.7).sum() > 2 * 300  # the 300 case spills into parts
    found = stream._shared_prefixes(spill, lengths, 0.7, counters, StreamStats())
    expected = repeated(np.sort(np.concatenate(every)))
    assert len(expected) > 0 and np.array_equal(found, expected)


def test_seen_table_has_twice_the_slots_a_member_can_fill() -> None:
    for visits in (0, 1, 2, 3, 64, 100, 4096):
        table = seen_table(visits)
        slots = len(table)
        assert slots & (slots - 1) == 0 and slots >= 2 * max(1, visits)
        assert table.shape[1] == 3 and np.all(table == -1)


@numba.njit
def _may_reach_all(values, offsets, bitmaps, pairs, floor):  # type: ignore[no-untyped-def]
    out = np.empty(len(pairs), np.bool_)
    for i in range(len(pairs)):
        out[i] = may_reach(values, offsets, bitmaps, pairs[i, 0], pairs[i, 1], floor)
    return out


def test_a_bitmap_skips_only_pairs_below_the_floor() -> None:
    # Truth: Python's set Jaccard. Sets overlap a lot (a small pool), so many pairs are near the
    # floor; a skipped pair must be below it, and most of the far ones are skipped.
    rng = np.random.default_rng(3)
    rows = [rng.choice(120, size=int(rng.integers(0, 50)), replace=False) for _ in range(300)]
    hashes = rng.integers(0, 2**32, 120, dtype=np.uint64).astype(np.uint32)
    offsets = np.concatenate([[0], np.cumsum([len(row) for row in rows])]).astype(np.int64)
    values, offsets = sorted_sets(np.concatenate([hashes[row] for row in rows]).astype(np.uint32), offsets)
    bitmaps = set_bitmaps(values, offsets)
    pairs = rng.integers(0, len(rows), (20_000, 2))
    for floor in (0.3, 0.5, 0.7, 0.9):
        reach = _may_reach_all(values, offsets, bitmaps, pairs, floor)
        truth = np.array([_jaccard(set(rows[a]), set(rows[b])) for a, b in pairs])
        assert not np.any(~reach & (truth >= floor))
        assert np.sum(~reach) > 0.5 * np.sum(truth < floor)


def _jaccard(a: set[int], b: set[int]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0
