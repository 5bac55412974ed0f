"""The distributed reduce behind `DropDuplicates.fit`: summaries in, decision files out.

Steps (every one a map on the executor; the driver only sums what the tasks return):
1. `PartitionKeys` per group of summary files (`map_groups`): (key, node) pairs into a
   hash-partitioned file.
2. `ReduceEdges` per partition: star edges, filed by node in both directions.
3. Components (`dataclean.dedup.connect`): large-star / small-star rounds, a map over the edge
   partitions each, persisted so a restarted fit resumes after the last complete round; then
   `LabelNodes`: each node's component root, filed by summary file.
4. `GatherCandidates` per summary file with candidates: their rows, partitioned by component.
5. `ClusterCandidates` per partition, the largest (in candidate rows, which step 4 counts)
   first: exact and verified near decisions, saved filed by input shard (one Arrow file per
   partition, one record batch per shard).

Intermediate files go to the scratch folder, a path or URI on any filesystem pyarrow supports
(`dataclean.io.files`), so the driver and the workers need no shared local disk.

Memory bounds: the driver holds nothing per row (per task a few counts, per summary file its
candidate count, the largest clusters, per-source counts up to `alarms.MAX_SOURCES`); a worker
holds one summary file's columns or one partition (for clustering, its small columns, and
sketches a chunk at a time: `dataclean.dedup.verify`), and applying the decisions, one shard's.
Partition counts are chosen so a partition is about `PARTITION_BYTES`: of key pairs; of edges,
`EDGE_SHARE` times fewer partitions; of the small columns a clustering task holds (below).
"""

from __future__ import annotations

import math
import posixpath
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from dataclean.dedup.alarms import add_counts, merge_largest, source_shares
from dataclean.dedup.connect import LabelNodes, Rounds, fingerprint, run_rounds
from dataclean.dedup.partition import (
    PartitionKeys,
    ReduceEdges,
    SourceFile,
    peak_memory_bytes,
)
from dataclean.dedup.verify import ClusterCandidates, GatherCandidates
from dataclean.executors.base import Executor
from dataclean.io.files import fresh_folder, make_dirs, parquet_metadata, remove_tree

PARTITION_BYTES = 64 << 20
# Edge files have a partition count of their own, this many times fewer than the key pairs'.
# A star edge is one of a bucket's (key, node) pairs, so the edges are a fraction of the pairs
# (9.9% at 10M documents of benchmarks/shaped_corpus.py), and a task reads its edge partition in
# pieces of `pieces.PIECE_EDGES` edges whatever its size, so that count is chosen for the
# workers, not for memory. Each components round's task reads batch p of every file of the
# previous round, P x P reads a round: with the key pairs' count that was the fit's fastest
# growing cost (34,596 reads in 7 rounds at 10M documents, 10x those at 3M).
EDGE_SHARE = 8
# A clustering task holds its partition's small columns (`dataclean.dedup.candidates`: these
# bytes a row besides the id and source) and reads sketches a chunk at a time, so its partitions
# are sized by the small columns, not by the sketches: sized by the sketches (about 5x the bytes),
# each of 52 tasks at 10M documents read every one of 400 candidate files twice, files x
# partitions reads that made the cluster step grow as the square of the corpus.
SMALL_ROW_BYTES = 64
# The shuffle's map task takes consecutive summary files until their keys (uncompressed, from the
# Parquet footers) reach this many bytes: a pair file per group instead of per summary file, so
# the edges step's files x partitions reads shrink by the group's size (about 3 files of 25,000
# short documents); the task holds its group's pairs, 2x these bytes, twice.
MAP_BYTES = 16 << 20


def _partitions(total_bytes: float, workers: int) -> int:
    """About `PARTITION_BYTES` each, at least two per worker, and a multiple of the worker count:
    the map's last round then keeps every worker busy (11 partitions on 2 workers left one idle
    for a whole partition)."""
    workers = max(workers, 1)
    count = max(2 * workers, math.ceil(total_bytes / PARTITION_BYTES))
    return math.ceil(count / workers) * workers


def source_files(
    summaries: Sequence[str], earlier: Sequence[str] = (), shards: Sequence[int] | None = None
) -> tuple[list[SourceFile], dict[str, pq.FileMetaData]]:
    """Number every summary row densely: earlier-output files first, then this run's shards.

    Also returns each file's Parquet footer (read once: on an object store each read is a request).
    """
    run_shards = list(shards) if shards is not None else [0] * len(summaries)
    if len(run_shards) != len(summaries):
        raise ValueError(f"{len(run_shards)} shard indices for {len(summaries)} summary files")
    listed = [(path, True, 0) for path in earlier]
    listed += [(path, False, shard) for path, shard in zip(summaries, run_shards, strict=True)]
    files = []
    footers = {}
    offset = 0
    for index, (path, is_earlier, shard) in enumerate(listed):
        footers[path] = metadata = parquet_metadata(path)
        files.append(SourceFile(index, path, offset, metadata.num_rows, is_earlier, shard))
        offset += metadata.num_rows
    return files, footers


def _column_bytes(metadata: pq.FileMetaData, columns: set[str]) -> int:
    """Uncompressed bytes of some columns of one Parquet file (from its footer)."""
    total = 0
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for column in range(row_group.num_columns):
            chunk = row_group.column(column)
            if chunk.path_in_schema.split(".")[0] in columns:
                total += chunk.total_uncompressed_size
    return total


def _row_bytes(files: Sequence[SourceFile], footers: dict[str, pq.FileMetaData], columns: set[str]) -> float:
    """Average uncompressed bytes per row of some summary columns (from Parquet footers)."""
    total = sum(_column_bytes(footers[source.path], columns) for source in files)
    rows: int = sum(footers[source.path].num_rows for source in files)
    return total / max(rows, 1)


def map_groups(
    files: Sequence[SourceFile], footers: dict[str, pq.FileMetaData], budget: int
) -> list[tuple[SourceFile, ...]]:
    """Consecutive summary files in groups whose keys take at most `budget` bytes (a larger file
    is a group of its own)."""
    groups: list[tuple[SourceFile, ...]] = []
    current: list[SourceFile] = []
    held = 0
    for source in files:
        size = _column_bytes(footers[source.path], {"keys"})
        if current and held + size > budget:
            groups.append(tuple(current))
            current, held = [], 0
        current.append(source)
        held += size
    if current:
        groups.append(tuple(current))
    return groups


def _stored_bytes(footer: pq.FileMetaData) -> int:
    return sum(footer.row_group(group).total_byte_size for group in range(footer.num_row_groups))


def find_duplicates(
    summaries: Sequence[str],
    scratch: str,
    executor: Executor,
    *,
    threshold: float,
    exact: bool,
    near: bool,
    verify: bool,
    earlier: Sequence[str] = (),
    shards: Sequence[int] | None = None,
) -> tuple[str, dict[str, Any]]:
    """Run steps 1-5 over summary files; returns the decisions folder and statistics.

    With `shards` (the input shard of each summary file), the decisions are filed by shard, so
    applying them to one shard reads only that shard's (`Decisions.load`); without, in one lot.
    """
    started = time.perf_counter()
    seconds: dict[str, float] = {}
    worker_peak = 0
    # Per step, the tasks' peak memory if that step raised it, else 0. A task reports its
    # process's high-water mark (VmHWM), which earlier tasks in that process may have set: the
    # step that first raised it is the one that needed the memory.
    step_peaks: dict[str, int] = {}
    last_peak = 0

    def lap(name: str) -> None:
        nonlocal started, last_peak
        now = time.perf_counter()
        seconds[name] = round(now - started, 3)
        started = now
        step_peaks[name] = worker_peak if worker_peak > last_peak else 0
        last_peak = max(last_peak, worker_peak)

    all_files, footers = source_files(summaries, earlier, shards)
    files = [source for source in all_files if source.rows > 0]
    nodes = sum(source.rows for source in files)
    workers = executor.workers

    key_bytes = nodes * _row_bytes(files, footers, {"keys"}) * 2
    key_partitions = _partitions(key_bytes, workers)
    edge_partitions = _partitions(key_bytes / EDGE_SHARE, workers)
    # What the persisted rounds depend on: the summary files (with their bytes, which change with
    # the band settings) and the partition counts; a fit with other inputs starts afresh.
    described = [
        [source.path, source.rows, source.earlier, source.shard, _stored_bytes(footers[source.path])]
        for source in all_files
    ]
    rounds = Rounds(
        posixpath.join(scratch, "components"), fingerprint([described, key_partitions, edge_partitions])
    )
    if rounds.resumed_from is None:
        pairs_folder = fresh_folder(posixpath.join(scratch, "pairs"))
        mapper = PartitionKeys(pairs_folder, key_partitions)
        groups = map_groups(files, footers, MAP_BYTES)
        mapped = executor.map(mapper, groups, light=True)
        worker_peak = max([worker_peak, *(peak for _, peak, _ in mapped)])
        by_source: Counter[str] | None = Counter()
        for _, _, sources in mapped:
            by_source = add_counts(by_source, sources)
        lap("partition")
        reducer = ReduceEdges(
            tuple(mapper.path(group[0].index) for group in groups), rounds.begin(0), edge_partitions
        )
        reduced = executor.map(reducer, range(key_partitions), light=True)
        worker_peak = max([worker_peak, *(peak for _, peak in reduced)])
        remove_tree(pairs_folder)
        edges_stats: dict[str, Any] = {
            "key_pairs": sum(count for count, _, _ in mapped),
            "edges": sum(count for count, _ in reduced),
            "rows_by_source": None if by_source is None else dict(by_source),
        }
        rounds.finish(0, edges_stats)
        lap("edges")
    edges_stats = rounds.stats(0)
    resumed_from = rounds.resumed_from
    found_sources = edges_stats["rows_by_source"]
    rows_by_source = None if found_sources is None else Counter[str](found_sources)

    stars, round_count, peak = run_rounds(executor, rounds, edge_partitions)
    worker_peak = max(worker_peak, peak)
    starts = tuple(source.offset for source in all_files)
    labeller = LabelNodes(stars, fresh_folder(posixpath.join(scratch, "labels")), starts)
    labelled = executor.map(labeller, range(edge_partitions), light=True)
    worker_peak = max([worker_peak, *(peak for _, peak in labelled)])
    per_file = np.zeros(len(all_files), dtype=np.int64)
    for file_counts, _ in labelled:
        per_file += np.asarray(file_counts, dtype=np.int64)
    remove_tree(rounds.folder)
    label_files = tuple(labeller.path(partition) for partition in range(edge_partitions))
    gather_sources = [source for source in files if per_file[source.index] > 0]
    candidates = int(per_file.sum())
    lap("components")

    candidates_folder = fresh_folder(posixpath.join(scratch, "candidates"))
    # A new folder name per fit: workers cache decisions by folder, and a later fit in the same
    # processes (a rerun into the same output) must not find the earlier ones.
    decisions_folder = posixpath.join(fresh_folder(posixpath.join(scratch, "decisions")), uuid.uuid4().hex)
    make_dirs(decisions_folder)
    row_bytes = _row_bytes(gather_sources, footers, {"id", "source"}) + SMALL_ROW_BYTES
    cluster_partitions = _partitions(candidates * row_bytes * 2, workers)
    gatherer = GatherCandidates(label_files, candidates_folder, cluster_partitions)
    results = executor.map(gatherer, gather_sources, light=True)
    worker_peak = max([worker_peak, *(peak for _, peak in results)])
    partition_rows = np.sum([rows for rows, _ in results], axis=0, dtype=np.int64)
    remove_tree(labeller.folder)
    lap("gather")

    clusterer = ClusterCandidates(
        tuple(gatherer.path(source.index) for source in gather_sources),
        decisions_folder,
        threshold,
        exact,
        near,
        verify,
        shards=max(shards, default=0) + 1 if shards is not None else 1,
    )
    counts: dict[str, int] = {}
    largest_component = 0
    largest: list[list[dict[str, Any]]] = []
    removed_by_source: Counter[str] | None = Counter()
    sizes: Counter[int] = Counter()
    if gather_sources:
        # The largest partitions first: one holding a giant component (one task whatever the
        # worker count) then starts at once, and the other workers decide the rest beside it;
        # in partition order it could start last, with the other workers idle through it.
        largest_first = [int(p) for p in np.argsort(-partition_rows, kind="stable")]
        results_largest_first = executor.map(clusterer, largest_first, light=True)
        by_partition = dict(zip(largest_first, results_largest_first, strict=True))
        cluster_results = [by_partition[p] for p in range(cluster_partitions)]
        for partition_counts, peak in cluster_results:
            worker_peak = max(worker_peak, peak)
            largest.append(partition_counts.pop("largest"))
            sizes.update(partition_counts.pop("cluster_sizes"))
            removed_by_source = add_counts(removed_by_source, partition_counts.pop("removed_by_source"))
            largest_component = max(largest_component, partition_counts.pop("largest_component"))
            for name, value in partition_counts.items():
                counts[name] = counts.get(name, 0) + value
    remove_tree(candidates_folder)
    lap("cluster")

    stats = {
        "rows": nodes,
        "key_pairs": edges_stats["key_pairs"],
        "edges": edges_stats["edges"],
        "component_rounds": round_count,
        "resumed_from_round": resumed_from,
        "partitions": [key_partitions, edge_partitions, cluster_partitions],
        "candidates": candidates,
        "largest_component": largest_component,
        "kept_in_clusters": counts.get("kept", 0),
        "exact_of": counts.get("exact_of", 0),
        "near_duplicate_of": counts.get("near_duplicate_of", 0),
        "comparisons": counts.get("comparisons", 0),
        "largest_clusters": merge_largest(largest),
        # [size, clusters of that size], for the report (`dataclean.report.clusters`).
        "cluster_sizes": sorted([size, count] for size, count in sizes.items()),
        "source_shares": source_shares(rows_by_source, removed_by_source),
        "seconds": seconds,
        "peak_worker_bytes": worker_peak,
        "peak_bytes_by_step": step_peaks,
        "peak_driver_bytes": peak_memory_bytes(),
    }
    return decisions_folder, stats
