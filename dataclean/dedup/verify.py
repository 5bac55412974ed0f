"""From candidate components to drop decisions: who is kept, who is a duplicate of whom.

Only rows in a component of two or more take part. A map task per summary file
(`GatherCandidates`) sends those rows (id, exact hash, keys, priority, sketch) to hash
partitions by component root; a task per partition (`ClusterCandidates`) decides each
component on its own:

1. Members are taken in keep order: priority, then id (rows from an earlier output first).
2. Exact: a member whose exact hash was seen before in its component is `exact_of` the first
   such member (or follows it, if that member turned out a near duplicate).
3. Near: a member is compared with the kept members ("centers") that share an LSH key with it;
   the most similar center with similarity >= threshold keeps it as `near_duplicate_of`, with
   that similarity as its score. Otherwise it becomes a center itself.

So a dropped row is always within the threshold of the row it names, which is kept: chains
(a ~ b ~ c with a !~ c) do not drop c for resembling a row that was itself dropped. Similarity
is the exact Jaccard of the two shingle sets (`verify`), or the share of equal MinHash values.

Memory per task: one summary file's columns (gather), or one partition of candidate rows with
their sketches (cluster). Candidates are usually a small part of the corpus.
"""

# numba kernels compute on numpy scalars, which mypy sees as Any here.
# mypy: disable-error-code="no-any-return"

from __future__ import annotations

import posixpath
from dataclasses import dataclass

import numba as nb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.dedup.partition import (
    SourceFile,
    flat_lists,
    peak_memory_bytes,
    read_partition,
    write_partitioned,
)
from dataclean.dedup.summary import SUMMARY_SCHEMA
from dataclean.io.files import load_array, read_parquet
from dataclean.jit import helper

CANDIDATE_SCHEMA = pa.schema(
    [
        pa.field("root", pa.int64()),
        pa.field("earlier", pa.bool_()),
        pa.field("shard", pa.int64()),
        *SUMMARY_SCHEMA,
    ]
)
DECISION_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string()),
        pa.field("kept", pa.string()),
        pa.field("kind", pa.string()),
        pa.field("score", pa.float64()),
    ]
)

# Decision kinds; the first three are also the reason prefixes the stage writes.
UNIQUE, KEPT, EXACT, NEAR = 0, 1, 2, 3
KIND_NAMES = {KEPT: "kept", EXACT: "exact_of", NEAR: "near_duplicate_of"}


@dataclass(frozen=True)
class GatherCandidates:
    """Map task: the candidate rows of one summary file, hash-partitioned by component root."""

    labels_folder: str
    folder: str
    partitions: int

    def path(self, index: int) -> str:
        return posixpath.join(self.folder, f"{index:06d}.arrow")

    def __call__(self, source: SourceFile) -> tuple[int, int]:
        labels = load_array(posixpath.join(self.labels_folder, f"{source.index:06d}.npy"))
        rows = np.flatnonzero(labels >= 0)
        summary = read_parquet(source.path, schema=SUMMARY_SCHEMA).take(pa.array(rows))
        roots = labels[rows]
        priority = summary.column("priority")
        if source.earlier:
            priority = pa.array(np.full(len(rows), -np.inf))
        table = pa.table(
            {
                "root": roots,
                "earlier": pa.array(np.full(len(rows), source.earlier)),
                "shard": pa.array(np.full(len(rows), source.shard, dtype=np.int64)),
                "id": summary.column("id"),
                "exact": summary.column("exact"),
                "keys": summary.column("keys"),
                "priority": priority,
                "sketch": summary.column("sketch"),
            },
            schema=CANDIDATE_SCHEMA,
        )
        write_partitioned(self.path(source.index), table, roots % self.partitions, self.partitions)
        return len(rows), peak_memory_bytes()


@dataclass(frozen=True)
class ClusterCandidates:
    """Reduce task: decide every component of one partition and save the decisions, filed by the
    input shard of the decided row: record batch s of the partition's file holds shard s's."""

    candidate_files: tuple[str, ...]
    folder: str
    threshold: float
    exact: bool
    near: bool
    verify: bool
    shards: int = 1  # record batches per decision file: one per input shard index

    def __call__(self, partition: int) -> tuple[dict[str, int], int]:
        table = read_partition(list(self.candidate_files), partition, CANDIDATE_SCHEMA)
        order = pc.sort_indices(
            table,
            sort_keys=[("root", "ascending"), ("priority", "ascending"), ("id", "ascending")],
        )
        table = table.take(order)
        key_values, key_offsets = flat_lists(table.column("keys"))
        sketch_values, sketch_offsets = flat_lists(table.column("sketch"))
        kind, target, score = decide(
            table.column("earlier").to_numpy(zero_copy_only=False),
            pc.fill_null(table.column("exact"), 0).to_numpy(),
            key_values.astype(np.uint64, copy=False),
            key_offsets,
            sketch_values.astype(np.uint32, copy=False),
            sketch_offsets,
            self.threshold,
            self.exact,
            self.near,
            self.verify,
        )
        decided = np.flatnonzero((kind != UNIQUE) & ~table.column("earlier").to_numpy(False))
        ids = table.column("id")
        names = np.array([""] + [KIND_NAMES[k] for k in (KEPT, EXACT, NEAR)], dtype=object)
        decisions = pa.table(
            {
                "id": ids.take(pa.array(decided)),
                "kept": ids.take(pa.array(target[decided])),
                "kind": pa.array(names[kind[decided]], pa.string()),
                "score": pa.array(score[decided]).cast(pa.float64()),
            },
            schema=DECISION_SCHEMA,
        )
        shard = table.column("shard").to_numpy()[decided]  # 0 where the shards are not known
        write_partitioned(
            posixpath.join(self.folder, f"{partition:05d}.arrow"), decisions, shard, self.shards
        )
        counts = {name: int(np.sum(kind[decided] == k)) for k, name in KIND_NAMES.items()}
        counts["candidates"] = table.num_rows
        return counts, peak_memory_bytes()


def _sorted_sets(values: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's hashes, sorted and deduplicated: (values, offsets)."""
    longest = max(1, int(np.diff(offsets).max(initial=0)))
    bits = max(1, (longest - 1).bit_length())
    out, out_offsets = np.empty_like(values), np.zeros_like(offsets)
    counts, scratch = np.empty((1 << bits) + 1, dtype=np.int64), np.empty(longest, dtype=values.dtype)
    used = _sorted_set_kernel(values, offsets, out, out_offsets, counts, scratch)
    return out[:used], out_offsets


@nb.njit(cache=True, nogil=True)
def _sorted_set_kernel(values, offsets, out, out_offsets, counts, scratch):  # type: ignore[no-untyped-def]
    """`_sorted_sets` into arrays it allocates (`dataclean.jit`); returns the values written.

    Hashes are uniform, so a bucket sort on the top bits (at least as many buckets as values) then
    insertion sort inside each tiny bucket runs in expected linear time: 5x faster than numba's
    np.sort per row, which dominated `fit`."""
    position = 0
    for row in range(len(offsets) - 1):
        start, end = offsets[row], offsets[row + 1]
        size = end - start
        row_bits = 1
        while (1 << row_bits) < size:
            row_bits += 1
        buckets = 1 << row_bits
        shift = 32 - row_bits
        counts[: buckets + 1] = 0
        for k in range(start, end):
            counts[(values[k] >> shift) + 1] += 1
        for b in range(buckets):
            counts[b + 1] += counts[b]
        for k in range(start, end):
            bucket = values[k] >> shift
            scratch[counts[bucket]] = values[k]
            counts[bucket] += 1
        # counts[b] is now the end of bucket b; insertion-sort each bucket in place.
        begin = 0
        for b in range(buckets):
            finish = counts[b]
            for i in range(begin + 1, finish):
                value = scratch[i]
                j = i - 1
                while j >= begin and scratch[j] > value:
                    scratch[j + 1] = scratch[j]
                    j -= 1
                scratch[j + 1] = value
            begin = finish
        for k in range(size):
            if k == 0 or scratch[k] != scratch[k - 1]:
                out[position] = scratch[k]
                position += 1
        out_offsets[row + 1] = position
    return position


def _jaccard_of(values: np.ndarray, offsets: np.ndarray, a: int, b: int) -> float:
    """The Jaccard similarity of rows a and b of sorted, deduplicated sets."""
    i, i_end = offsets[a], offsets[a + 1]
    j, j_end = offsets[b], offsets[b + 1]
    size = (i_end - i) + (j_end - j)
    if size == 0:
        return 0.0
    common = 0
    while i < i_end and j < j_end:
        if values[i] == values[j]:
            common += 1
            i += 1
            j += 1
        elif values[i] < values[j]:
            i += 1
        else:
            j += 1
    return common / (size - common)


# Compiled twice (`dataclean.jit`): for Python callers (tests, benchmarks) and for `_decide_kernel`.
_jaccard = nb.njit(cache=True, nogil=True)(_jaccard_of)
_jaccard_helper = helper(_jaccard_of)


@helper
def _agreement(values: np.ndarray, offsets: np.ndarray, a: int, b: int) -> float:
    length = offsets[a + 1] - offsets[a]
    if length == 0 or length != offsets[b + 1] - offsets[b]:
        return 0.0
    same = 0
    for k in range(length):
        same += values[offsets[a] + k] == values[offsets[b] + k]
    return same / length


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing's multiplier, 2**64 / golden ratio


def _table_bits(size: int) -> int:
    """At least twice as many slots as keys (and 2): a linear probe stays short."""
    return max(1, (2 * size - 1).bit_length())


@helper
def _slot(keys: np.ndarray, filled: np.ndarray, key: np.uint64, bits: int) -> int:
    # Where `key` is in an open-addressing table, or the empty slot it would go to.
    mask = (1 << bits) - 1
    i = np.int64((key * _GOLDEN) >> np.uint64(64 - bits))
    while filled[i] and keys[i] != key:
        i = (i + 1) & mask
    return i


@nb.njit(cache=True, nogil=True)
def _decide_kernel(
    earlier: np.ndarray,
    exact_hash: np.ndarray,
    key_values: np.ndarray,
    key_offsets: np.ndarray,
    sketch: np.ndarray,
    sketch_offsets: np.ndarray,
    threshold: float,
    do_exact: bool,
    do_near: bool,
    exact_jaccard: bool,
    kind: np.ndarray,
    target: np.ndarray,
    score: np.ndarray,
    table_keys: np.ndarray,
    table_filled: np.ndarray,
    table_rows: np.ndarray,
    entry_links: np.ndarray,
    seen: np.ndarray,
    bits: int,
) -> None:
    """`decide`'s loop, into kind, target and score; the tables are allocated by `decide`
    (`dataclean.jit`), each a pair: exact hashes and band keys."""
    count = len(earlier)
    text_keys, head_keys = table_keys[0], table_keys[1]
    text_filled, head_filled = table_filled[0], table_filled[1]
    first_with_text, head = table_rows[0], table_rows[1]  # row of each exact hash, latest entry of each key
    entry_center, entry_next = entry_links[0], entry_links[1]
    entries = 0
    for x in range(count):
        text_slot = _slot(text_keys, text_filled, exact_hash[x], bits) if do_exact else 0
        if do_exact and not earlier[x] and text_filled[text_slot]:
            rep = first_with_text[text_slot]
            if kind[rep] == NEAR:
                kind[x], target[x], score[x] = NEAR, target[rep], score[rep]
            else:
                kind[x], target[x], score[x] = EXACT, rep, 1.0
                kind[rep] = KEPT
            continue
        if do_exact and not text_filled[text_slot]:
            text_keys[text_slot], text_filled[text_slot], first_with_text[text_slot] = exact_hash[x], True, x
        if do_near and not earlier[x]:
            best = -1
            best_similarity = -1.0
            for k in range(key_offsets[x], key_offsets[x + 1]):
                key_slot = _slot(head_keys, head_filled, key_values[k], bits)
                entry = head[key_slot] if head_filled[key_slot] else -1
                while entry >= 0:
                    center = entry_center[entry]
                    entry = entry_next[entry]
                    if seen[center] == x:
                        continue
                    seen[center] = x
                    if exact_jaccard:
                        similarity = _jaccard_helper(sketch, sketch_offsets, x, center)
                    else:
                        similarity = _agreement(sketch, sketch_offsets, x, center)
                    if similarity >= threshold and (
                        similarity > best_similarity or (similarity == best_similarity and center < best)
                    ):
                        best, best_similarity = center, similarity
            if best >= 0:
                kind[x], target[x], score[x] = NEAR, best, best_similarity
                if kind[best] == UNIQUE:
                    kind[best] = KEPT
                continue
        if do_near:  # x is kept: later members may be its near duplicates
            for k in range(key_offsets[x], key_offsets[x + 1]):
                entry_center[entries] = x
                key_slot = _slot(head_keys, head_filled, key_values[k], bits)
                entry_next[entries] = head[key_slot] if head_filled[key_slot] else -1
                head_keys[key_slot], head_filled[key_slot], head[key_slot] = key_values[k], True, entries
                entries += 1


def decide(
    earlier: np.ndarray,
    exact_hash: np.ndarray,
    key_values: np.ndarray,
    key_offsets: np.ndarray,
    sketch: np.ndarray,
    sketch_offsets: np.ndarray,
    threshold: float,
    exact: bool,
    near: bool,
    verify: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Kind (UNIQUE/KEPT/EXACT/NEAR), kept row position and score per row.

    Rows must be sorted by component root, then keep order (see the module docstring): keys
    and exact hashes never cross components, so the order alone separates them.
    """
    if near and verify:
        sketch, sketch_offsets = _sorted_sets(sketch, sketch_offsets)
    count = len(earlier)
    kind, target, score = np.zeros(count, np.int8), np.arange(count), np.full(count, np.nan)
    # Keys and exact hashes never cross components (rows sharing one are connected), so one
    # table per partition serves every component in it. Open-addressing tables in arrays, not
    # numba's typed Dict, which costs about a second more to compile on a first run.
    bits = _table_bits(max(count, len(key_values)))
    _decide_kernel(
        np.ascontiguousarray(earlier, dtype=np.bool_),
        np.ascontiguousarray(exact_hash, dtype=np.uint64),
        key_values,
        key_offsets,
        sketch,
        sketch_offsets,
        threshold,
        exact,
        near,
        near and verify,
        kind,
        target,
        score,
        np.empty((2, 1 << bits), np.uint64),
        np.zeros((2, 1 << bits), np.bool_),
        np.empty((2, 1 << bits), np.int64),
        np.empty((2, len(key_values)), np.int64),
        np.full(count, -1, np.int64),
        bits,
    )
    return kind, target, score
