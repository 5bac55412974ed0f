"""From candidate components to drop decisions: who is kept, who is a duplicate of whom.

Only rows in a component of two or more take part. A map task per summary file
(`GatherCandidates`) sends those rows (id, exact hash, keys, priority, sketch) to hash
partitions by component root; a task per partition (`ClusterCandidates`) decides each
component on its own:

1. Members are taken in keep order: priority, then id (rows from an earlier output first).
2. Exact: a member whose exact hash was seen before in its component is `exact_of` the first
   such member (or follows it, if that member turned out a near duplicate).
3. Near: a member is compared with kept members ("centers") of its component; the most similar
   center with similarity >= threshold keeps it as `near_duplicate_of`, with that similarity as
   its score. Otherwise it becomes a center itself.

So a dropped row is always within the threshold of the row it names, which is kept: chains
(a ~ b ~ c with a !~ c) do not drop c for resembling a row that was itself dropped. Similarity
is the exact Jaccard of the two shingle sets (`verify`), or the share of equal MinHash values.

Which centers a member is compared with, and why the work per member is bounded: centers are
filed under tokens, and a member looks up its own. With `verify`, the tokens are a row's prefix
shingles (`dataclean.dedup.sets`): every center at or over the threshold shares one, so the
member is compared with all of them, while pages that merely share a site template (Jaccard
about 0.5, one giant LSH component) share none, and a member of such a component is compared
with next to nothing (it was compared with every center sharing a band: quadratic; 6,000 such
pages took 46 s against 3.5 s for plain ones). Without `verify`, the tokens are the LSH band
keys. Two caps bound the rest whatever the graph: a token files at most `MAX_POSTINGS` centers
(the first in keep order), and a member is compared with at most `MAX_CHECKS` centers, those
sharing the most tokens with it (ties: earliest in keep order). Neither changes precision (every
drop is still verified); they only bind when many centers share a member's rarest shingles,
which costs recall only there. Everything a decision depends on is its component's rows, so
decisions do not depend on the partition count or on which components share a partition.

Memory per task: one summary file's columns (gather); for clustering, the small columns of
the partition's rows (`dataclean.dedup.candidates`, about 60 bytes and the id a row), and their
sketches and keys a bounded piece at a time (`decide_rows`): runs of whole small components
together, a large one alone in chunks (`dataclean.dedup.stream`), which keeps between chunks only
its token table and its entries, and compares with its centers' sets where its
first pass spilled them to local disk. One giant component (pages sharing a site template, or a
percolating LSH graph) no longer needs a task as large as its sketches.
"""

# numba kernels compute on numpy scalars, which mypy sees as Any here.
# mypy: disable-error-code="no-any-return"

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

import numba as nb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.dedup.alarms import cluster_sizes, largest_clusters, source_counts
from dataclean.dedup.candidates import PartitionRows
from dataclean.dedup.centers import (
    EMPTY,
    best_center,
    claim_slot,
    file_center,
    seen_table,
    token_slot,
    token_table,
)
from dataclean.dedup.connect import load_labels
from dataclean.dedup.partition import (
    SourceFile,
    peak_memory_bytes,
    write_partitioned,
)
from dataclean.dedup.sets import (
    prefix_tokens,
    set_bitmaps,
    slot,
    sorted_sets,
    table_bits,
)
from dataclean.dedup.stream import (
    DEFAULT_CHUNK,
    EXACT,
    KEPT,
    NEAR,
    UNIQUE,
    Chunk,
    StreamStats,
    decide_component,
)
from dataclean.dedup.summary import SUMMARY_SCHEMA
from dataclean.io.files import atomic_output, read_parquet

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

# Bounds on the work per member (module docstring): entries kept per token, centers verified.
# 16 entries a token, not 64: on a percolating LSH graph (10M short documents, one component of
# 5.4M rows) a member visited 569 entries at 64, and the cap bound so late that the component's
# decision grew faster than its rows (cluster step 111.7 s at 64, 72.9 s at 16); at 16 it lost
# 0.15% of that run's drops (all verified near duplicates), none on the truth benchmarks
# (bench_dedup's 30,000 documents, bench_dedup_template's planted copies): docs/scaling.md.
MAX_POSTINGS = 16
MAX_CHECKS = 32

KIND_NAMES = {KEPT: "kept", EXACT: "exact_of", NEAR: "near_duplicate_of"}


@dataclass(frozen=True)
class GatherCandidates:
    """Map task: the candidate rows of one summary file, hash-partitioned by component root.
    `label_files` are the components' labels, filed by summary file (`dataclean.dedup.connect`)."""

    label_files: tuple[str, ...]
    folder: str
    partitions: int

    def path(self, index: int) -> str:
        return posixpath.join(self.folder, f"{index:06d}.arrow")

    def __call__(self, source: SourceFile) -> tuple[np.ndarray, int]:
        """Rows sent to each partition; the peak memory."""
        labels = load_labels(self.label_files, source.index, source.offset, source.rows)
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
                "source": summary.column("source"),
            },
            schema=CANDIDATE_SCHEMA,
        )
        partition = roots % self.partitions
        write_partitioned(self.path(source.index), table, partition, self.partitions)
        return np.bincount(partition, minlength=self.partitions), peak_memory_bytes()


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
    chunk: Chunk = DEFAULT_CHUNK  # the most rows and sketch values a task reads at once

    def __call__(self, partition: int) -> tuple[dict[str, Any], int]:
        """Counts of each decision kind, candidates and comparisons, the partition's largest
        clusters and its removed rows per source (`dataclean.dedup.alarms`); the peak memory."""
        rows = PartitionRows(list(self.candidate_files), partition, CANDIDATE_SCHEMA)
        table = rows.table
        kind, target, score, checks = decide_rows(
            rows, self.threshold, (self.exact, self.near, self.verify), StreamStats(), self.chunk
        )
        decided = np.flatnonzero((kind != UNIQUE) & ~table.column("earlier").to_numpy(False))
        ids = table.column("id")
        shard = table.column("shard").to_numpy()[decided]  # 0 where the shards are not known
        path = posixpath.join(self.folder, f"{partition:05d}.arrow")
        write_decisions(path, ids, decided, shard, self.shards, (kind, target, score))
        counts: dict[str, Any] = {name: int(np.sum(kind[decided] == k)) for k, name in KIND_NAMES.items()}
        counts["candidates"] = table.num_rows
        counts["comparisons"] = checks
        # The rows of the partition's largest component: the one task's work that no worker
        # count shortens (`dataclean.dedup.stream`).
        counts["largest_component"] = int(np.diff(component_bounds(table.column("root").to_numpy())).max())
        counts["largest"] = largest_clusters(ids, kind, target, (EXACT, NEAR))
        counts["cluster_sizes"] = cluster_sizes(kind, target, (EXACT, NEAR))
        removed = np.isin(kind, (EXACT, NEAR)) & ~table.column("earlier").to_numpy(False)
        counts["removed_by_source"] = source_counts(table.column("source"), removed)
        return counts, peak_memory_bytes()


def write_decisions(
    path: str,
    ids: pa.ChunkedArray,
    decided: np.ndarray,
    shard: np.ndarray,
    shards: int,
    decision: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> None:
    """The decided rows' (id, kept id, kind, score) as one Arrow file whose record batch s holds
    shard s's, in keep order (`partition.write_partitioned`'s layout), built a shard at a time:
    a partition holding a percolating component decides millions of rows, and a table of all
    their decisions and its reordered copy (about 150 B a row) would outgrow its small columns."""
    kind, target, score = decision
    names = np.array([""] + [KIND_NAMES[k] for k in (KEPT, EXACT, NEAR)], dtype=object)
    order = decided[np.argsort(shard, kind="stable")]
    bounds = np.zeros(shards + 1, dtype=np.int64)
    np.cumsum(np.bincount(shard, minlength=shards), out=bounds[1:])
    with atomic_output(path) as sink, pa.ipc.new_file(sink, DECISION_SCHEMA) as writer:
        for number in range(shards):
            rows = order[bounds[number] : bounds[number + 1]]
            columns = [
                ids.take(pa.array(rows)).combine_chunks(),
                ids.take(pa.array(target[rows])).combine_chunks(),
                pa.array(names[kind[rows]], pa.string()),
                pa.array(score[rows]).cast(pa.float64()),
            ]
            writer.write_batch(pa.RecordBatch.from_arrays(columns, schema=DECISION_SCHEMA))


@nb.njit(cache=True, nogil=True)
def _decide_kernel(
    earlier: np.ndarray,
    exact_hash: np.ndarray,
    bounds: np.ndarray,
    token_values: np.ndarray,
    token_offsets: np.ndarray,
    sketch: np.ndarray,
    sketch_offsets: np.ndarray,
    bitmaps: np.ndarray,
    threshold: float,
    do_exact: bool,
    do_near: bool,
    exact_jaccard: bool,
    limits: np.ndarray,
    kind: np.ndarray,
    target: np.ndarray,
    score: np.ndarray,
    text_table: tuple[np.ndarray, np.ndarray, np.ndarray],
    tokens_filed: np.ndarray,
    entries: tuple[np.ndarray],
    scratch: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    bits: tuple[int, int],
) -> int:
    """`decide`'s loop, into kind, target and score; returns the similarities computed. Tables
    and scratch arrays are allocated by `decide` (`dataclean.jit`): exact hashes (per partition:
    they never cross components), tokens (cleared after each component: prefix shingles do cross
    components), posting entries (`centers.file_center`: 4 slots a token of the largest
    component), and a member's scratch for the centers it finds (`centers.best_center`)."""
    max_postings, max_checks = limits[0], limits[1]
    text_keys, text_filled, first_with_text = text_table
    found, ranked, local, used = scratch
    text_bits, token_bits = bits
    checks = 0
    for component in range(len(bounds) - 1):
        entry_count = 0
        used_count = 0
        for x in range(bounds[component], bounds[component + 1]):
            text_slot = slot(text_keys, text_filled, exact_hash[x], text_bits) if do_exact else 0
            if do_exact and not earlier[x] and text_filled[text_slot]:
                rep = first_with_text[text_slot]
                if kind[rep] == NEAR:
                    kind[x], target[x], score[x] = NEAR, target[rep], score[rep]
                else:
                    kind[x], target[x], score[x] = EXACT, rep, 1.0
                    kind[rep] = KEPT
                continue
            if do_exact and not text_filled[text_slot]:
                text_keys[text_slot], text_filled[text_slot] = exact_hash[x], True
                first_with_text[text_slot] = x
            if do_near and not earlier[x]:
                best, best_similarity, count = best_center(
                    token_values,
                    token_offsets[x],
                    token_offsets[x + 1],
                    tokens_filed,
                    entries,
                    (found, ranked, local),
                    x,
                    sketch,
                    sketch_offsets,
                    bitmaps,
                    x,
                    threshold,
                    exact_jaccard,
                    max_checks,
                    token_bits,
                )
                checks += count
                if best >= 0:
                    kind[x], target[x], score[x] = NEAR, best, best_similarity
                    if kind[best] == UNIQUE:
                        kind[best] = KEPT
                    continue
            if do_near:  # x is kept: later members may be its near duplicates
                for k in range(token_offsets[x], token_offsets[x + 1]):
                    place = token_slot(tokens_filed, token_values[k], token_bits)
                    if claim_slot(tokens_filed, place, token_values[k]):
                        used[used_count] = place
                        used_count += 1
                    entry_count = file_center(tokens_filed, entries, place, x, max_postings, entry_count)[1]
        for i in range(used_count):
            tokens_filed[used[i], 1] = EMPTY
    return checks


def component_bounds(roots: np.ndarray) -> np.ndarray:
    """Where each component starts in rows sorted by root, and the end: [0, ..., len(roots)]."""
    starts = np.flatnonzero(roots[1:] != roots[:-1]) + 1
    return np.concatenate([[0], starts, [len(roots)]]).astype(np.int64)


def decide_rows(
    rows: PartitionRows,
    threshold: float,
    flags: tuple[bool, bool, bool],
    stats: StreamStats,
    chunk: Chunk = DEFAULT_CHUNK,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """`decide` over a partition's rows (keep order), a bounded piece at a time: runs of whole
    components of at most `chunk.rows` rows and `chunk.values` sketch values together, read and
    decided by `decide`; a larger component alone, in chunks (`dataclean.dedup.stream`). The
    decisions are the same either way (each component's depend on its rows only)."""
    _, near, verify = flags
    count = rows.count
    kind, target, score = np.zeros(count, np.int8), np.arange(count), np.full(count, np.nan)
    if count == 0:
        return kind, target, score, 0
    roots = rows.table.column("root").to_numpy()
    earlier = rows.table.column("earlier").to_numpy(zero_copy_only=False)
    exact_hash = pc.fill_null(rows.table.column("exact"), 0).to_numpy()
    bounds = component_bounds(roots)
    values_before = np.concatenate([[0], np.cumsum(rows.lengths)])[bounds]
    large = (np.diff(bounds) > chunk.rows) | (np.diff(values_before) > chunk.values)
    large_at = np.flatnonzero(large)
    limits = np.array([MAX_POSTINGS, MAX_CHECKS], np.int64)
    checks = 0
    component = 0
    while component < len(bounds) - 1:
        first = int(bounds[component])
        if large[component]:
            last = int(bounds[component + 1])
            checks += decide_component(
                rows,
                np.arange(first, last),
                earlier[first:last],
                exact_hash[first:last],
                rows.lengths[first:last],
                flags,
                threshold,
                limits,
                (kind, target, score),
                stats,
                chunk,
            )
            component += 1
            continue
        # Whole small components up to the next large one, within the chunk's bounds.
        after = int(np.searchsorted(large_at, component))
        next_large = int(large_at[after]) if after < len(large_at) else len(large)
        by_rows = np.searchsorted(bounds, first + chunk.rows, side="right") - 1
        by_values = np.searchsorted(values_before, values_before[component] + chunk.values, side="right") - 1
        end = max(component + 1, min(next_large, int(by_rows), int(by_values)))
        last = int(bounds[end])
        positions = np.arange(first, last)
        stats.saw(last - first, int(values_before[end] - values_before[component]))
        empty = np.zeros(0, np.uint64), np.zeros(last - first + 1, np.int64)
        sketch = rows.sketches(positions) if near else (empty[0].astype(np.uint32), empty[1])
        keys = rows.keys(positions) if near and not verify else empty
        block = decide(
            roots[first:last],
            earlier[first:last],
            exact_hash[first:last],
            keys[0],
            keys[1],
            sketch[0],
            sketch[1],
            threshold,
            flags[0],
            near,
            verify,
        )
        kind[first:last], target[first:last], score[first:last] = block[0], block[1] + first, block[2]
        checks += block[3]
        component = end
    return kind, target, score, checks


def decide(
    roots: np.ndarray,
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
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Kind (UNIQUE/KEPT/EXACT/NEAR), kept row position and score per row, and the similarities
    computed.

    Rows must be sorted by component root, then keep order (see the module docstring). A member
    looks its centers up by tokens: its prefix shingles (`dataclean.dedup.sets`) when `verify`,
    else its LSH band keys.
    """
    count = len(earlier)
    bounds = component_bounds(roots) if count else np.zeros(1, np.int64)
    bitmaps = np.zeros((0, 2), np.uint64)
    if near and verify:
        sketch, sketch_offsets = sorted_sets(sketch, sketch_offsets)
        tokens, token_offsets = prefix_tokens(sketch, sketch_offsets, bounds, threshold)
        bitmaps = set_bitmaps(sketch, sketch_offsets)
    else:
        tokens, token_offsets = key_values, key_offsets
    kind, target, score = np.zeros(count, np.int8), np.arange(count), np.full(count, np.nan)
    per_row = np.diff(token_offsets)
    # Token tables hold one component at a time: sized by the component with the most tokens.
    most = int(np.add.reduceat(per_row, bounds[:-1]).max(initial=0)) if count else 0
    text_bits, token_bits = table_bits(count), table_bits(most)
    found = max(1, min(count, int(per_row.max(initial=0)) * MAX_POSTINGS))
    checks = _decide_kernel(
        np.ascontiguousarray(earlier, dtype=np.bool_),
        # A writable copy: read in one piece, the column comes read-only, in several writable,
        # and numba compiles the kernel apart for each (a first run compiled it twice).
        np.array(exact_hash, dtype=np.uint64),
        bounds,
        tokens,
        token_offsets,
        sketch,
        sketch_offsets,
        bitmaps,
        threshold,
        exact,
        near,
        near and verify,
        np.array([MAX_POSTINGS, MAX_CHECKS], np.int64),
        kind,
        target,
        score,
        (
            np.empty(1 << text_bits, np.uint64),
            np.zeros(1 << text_bits, np.bool_),
            np.empty(1 << text_bits, np.int64),
        ),
        token_table(token_bits),
        (np.empty(max(1, 4 * most), np.int32),),
        (
            np.empty(found, np.int64),
            np.empty(found, np.int64),
            seen_table(found),
            np.empty(max(1, most), np.int64),
        ),
        (text_bits, token_bits),
    )
    return kind, target, score, int(checks)
