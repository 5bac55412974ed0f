"""Best-fit-decreasing packing of whole samples into sequences of exactly `capacity` tokens.

Ding et al. 2024, "Fewer Truncations Improve Language Modeling" (arXiv:2404.10830): sort the
samples by length, longest first, and put each into the open sequence with the least room that
still holds it, opening a new one when none does. No sample is cut (the truncation that naive
concatenate-and-chunk packing causes at every sequence boundary), and the padding left is small
when samples are short against the sequence (the paper reports under 0.01% unused tokens at 2,048
tokens on its corpora). As there, the open sequences are kept in a segment tree over their free
room, so each placement costs O(log capacity) and the whole packing O(n log n) for sorting.

A sample longer than `capacity` is split into consecutive `capacity`-token pieces, each a sequence
of its own, and its remainder is packed like any other sample. Everything here is a function of the
lengths alone (and the seed), which is what makes `dataclean pack`'s output the same whatever the
executor or worker count.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def _best_fit_kernel(  # type: ignore[no-untyped-def]
    order, lengths, capacity, bin_of, room, tree, heads, next_bin
):  # pragma: no cover - compiled
    """Places items in `order`; `tree` is a segment tree of open-bin counts by free room."""
    size = tree.shape[0] // 2
    bins = 0
    for item in order:
        need = lengths[item]
        # the leftmost free room >= need that some open bin has (-1: none)
        node = need + size
        found = -1
        while True:
            if tree[node] > 0:
                while node < size:
                    node = 2 * node
                    if tree[node] == 0:
                        node += 1
                found = node - size
                break
            while node & 1:
                node >>= 1
            if node == 0:
                break
            node += 1
        if found < 0:
            target = bins
            bins += 1
            free = capacity
        else:
            target = heads[found]
            heads[found] = next_bin[target]
            free = found
            node = found + size
            while node > 0:
                tree[node] -= 1
                node >>= 1
        bin_of[item] = target
        free -= need
        room[target] = free
        next_bin[target] = heads[free]
        heads[free] = target
        node = free + size
        while node > 0:
            tree[node] += 1
            node >>= 1
    return bins


def best_fit_decreasing(lengths: np.ndarray, capacity: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The bin of every item, the placement order (longest first, ties by index) and the bin count.

    `lengths`: integers in [1, capacity]. Bins are numbered in the order they were opened.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    if len(lengths) and (lengths.min() < 1 or lengths.max() > capacity):
        raise ValueError(f"item lengths must be in [1, {capacity}]")
    order = np.argsort(-lengths, kind="stable")
    size = 1
    while size < capacity + 1:
        size *= 2
    tree = np.zeros(2 * size, dtype=np.int64)
    heads = np.full(capacity + 1, -1, dtype=np.int64)
    bin_of = np.empty(len(lengths), dtype=np.int64)
    room = np.empty(len(lengths), dtype=np.int64)
    next_bin = np.empty(len(lengths), dtype=np.int64)
    count = _best_fit_kernel(order, lengths, capacity, bin_of, room, tree, heads, next_bin)
    return bin_of, order, int(count)


@dataclass
class PackPlan:
    """Where every token span goes: one span per sequence piece of a sample.

    Per span: `sample` (its index in corpus order), `offset` (first token within the sample),
    `length`, `sequence` (the output row, after shuffling) and `start` (first position in it).
    `split_samples`: samples longer than the sequence, cut into pieces.
    """

    sample: np.ndarray
    offset: np.ndarray
    length: np.ndarray
    sequence: np.ndarray
    start: np.ndarray
    sequences: int
    split_samples: int


def plan_packing(lengths: np.ndarray, capacity: int, seed: int | None) -> PackPlan:
    """Spans of every sample (tokens, end-of-sample included) in sequences of `capacity` tokens,
    sequences shuffled by `seed` (None: in packing order, whole pieces last)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    if len(lengths) and lengths.min() < 1:
        raise ValueError("every sample has at least its end-of-sample token")
    whole, rest = np.divmod(lengths, capacity)
    packed = np.flatnonzero(rest > 0)
    bin_of, order, bins = best_fit_decreasing(rest[packed], capacity)
    rank = np.empty(len(packed), dtype=np.int64)
    rank[order] = np.arange(len(packed))
    # within a sequence, samples in placement order: their starts are running sums of lengths
    in_bin = np.lexsort((rank, bin_of))
    packed_length = rest[packed][in_bin]
    packed_bin = bin_of[in_bin]
    ends = np.cumsum(packed_length)
    first_of_bin = np.r_[True, packed_bin[1:] != packed_bin[:-1]] if len(in_bin) else np.zeros(0, bool)
    bin_base = np.maximum.accumulate(np.where(first_of_bin, ends - packed_length, 0)) if len(in_bin) else ends
    packed_start = ends - packed_length - bin_base
    # whole pieces: sequences bins, bins + 1, ... in (sample, piece) order
    pieces_sample = np.repeat(np.arange(len(lengths)), whole)
    pieces_index = np.arange(len(pieces_sample)) - np.repeat(np.cumsum(whole) - whole, whole)
    sequences = bins + len(pieces_sample)
    canonical = np.concatenate([packed_bin, bins + np.arange(len(pieces_sample))])
    position = np.arange(sequences) if seed is None else np.random.default_rng(seed).permutation(sequences)
    return PackPlan(
        sample=np.concatenate([packed[in_bin], pieces_sample]),
        offset=np.concatenate([whole[packed[in_bin]] * capacity, pieces_index * capacity]),
        length=np.concatenate([packed_length, np.full(len(pieces_sample), capacity)]).astype(np.int32),
        sequence=position[canonical] if sequences else canonical,
        start=np.concatenate([packed_start, np.zeros(len(pieces_sample), np.int64)]).astype(np.int32),
        sequences=int(sequences),
        split_samples=int(np.count_nonzero(lengths > capacity)),
    )


def naive_truncations(lengths: np.ndarray, capacity: int) -> int:
    """Samples that concatenate-and-chunk packing cuts: those crossing a sequence boundary."""
    ends = np.cumsum(np.asarray(lengths, dtype=np.int64))
    starts = ends - np.asarray(lengths, dtype=np.int64)
    return int(np.count_nonzero(starts // capacity != (ends - 1) // capacity))
