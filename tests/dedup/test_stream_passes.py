"""The large component's passes as they overlap work: the same results as done one by one.

Truth: the shared prefix tokens computed the plain way (every chunk's prefixes, one sort,
the repeated ones), and the order of work asked of `_ahead`; the decisions themselves are
checked against `decide` and the exhaustive check in `test_stream_decisions`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dataclean.dedup import stream
from dataclean.dedup.centers import seen_table
from dataclean.dedup.sets import count_kernel, prefix_lengths, repeated, sorted_sets
from dataclean.dedup.stream import StreamStats


def _sets(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted sets of 20-60 shingles drawn from a small pool, so prefixes repeat."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(20, 60, rows)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    values = rng.integers(0, 5_000, int(offsets[-1])).astype(np.uint32)
    return sorted_sets(values, offsets)


@pytest.mark.parametrize("shared_tokens", [10**9, 300])
def test_shared_prefixes_in_halves_and_parts_equal_one_sort(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared_tokens: int
) -> None:
    # 10**9: held in two halves, sorted side by side; 300: spilled in parts, two sorted at once.
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


def test_work_ahead_comes_back_in_order_and_raises() -> None:
    assert list(stream._ahead(lambda index: index * index, 6)) == [0, 1, 4, 9, 16, 25]
    assert list(stream._ahead(lambda index: index, 0)) == []

    def fails(index: int) -> int:
        if index == 2:
            raise ValueError("chunk 2")
        return index

    with pytest.raises(ValueError, match="chunk 2"):
        list(stream._ahead(fails, 4))


def test_seen_table_has_twice_the_slots_a_member_can_fill() -> None:
    for visits in (0, 1, 2, 3, 64, 100, 4096):
        table = seen_table(visits)
        slots = len(table)
        assert slots & (slots - 1) == 0 and slots >= 2 * max(1, visits)
        assert table.shape[1] == 3 and np.all(table == -1)
