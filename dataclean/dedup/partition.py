"""The shuffle: group (key, node) pairs of every summary file by key, in hash-partitioned files.

Every summary row gets a dense integer `node` (its file's row offset plus its row number). A map
task per group of consecutive summary files (`PartitionKeys`; groups of about
`reduce.MAP_BYTES` of keys) writes one Arrow IPC file whose record batch p holds the (key, node)
pairs with key % partitions == p; a reduce task per partition (`ReduceEdges`) reads
batch p of every file, sorts by (key, node) and turns each bucket of equal keys into star edges
from every member to the bucket's smallest node, which connect the same components as all pairs
(k - 1 edges per bucket instead of k(k - 1)/2), written in both directions and filed by node
(`write_edges`) for the components' rounds (`dataclean.dedup.connect`). Files, not Ray's object
store or Ray Data's groupby: on this machine those were 2-8x slower and spilled
(docs/measurements.md). They live in the fit's scratch folder on whatever filesystem the output
is on (`dataclean.io.files`); a reduce task reads one record batch of each file, which is a
ranged read on an object store and a memory map on a local disk.

Memory per task: a map task holds its group's pairs twice (16 B x rows x keys per row); a reduce
task holds its partition (16 B x all pairs / partitions) plus a sort permutation.
"""

from __future__ import annotations

import posixpath
import resource
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from dataclean.dedup.alarms import source_counts
from dataclean.dedup.sets import positions, repeated
from dataclean.io.files import atomic_output, open_input, read_parquet

PAIR_SCHEMA = pa.schema([pa.field("key", pa.uint64()), pa.field("node", pa.int64())])
EDGE_SCHEMA = pa.schema([pa.field("node", pa.int64()), pa.field("other", pa.int64())])
# The summary columns a map task reads (a summary written before `source` existed reads it as null).
_KEYS_SOURCE = pa.schema([pa.field("keys", pa.list_(pa.uint64())), pa.field("source", pa.string())])


@dataclass(frozen=True)
class SourceFile:
    """A summary file and where its rows start in the dense node numbering."""

    index: int
    path: str
    offset: int
    rows: int
    earlier: bool = False  # from an index of an earlier output: never dropped, always wins
    shard: int = 0  # the input shard it summarizes (decisions are filed by it); 0 if unknown


def peak_memory_bytes() -> int:
    """This process's peak resident memory so far.

    Linux's VmHWM, which belongs to the running program; `ru_maxrss` is inherited across fork
    and exec, so a worker started by a big parent would report the parent's peak.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def flat_lists(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(values, offsets) of a list column as numpy arrays; null lists are empty."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    lengths = pa.compute.fill_null(pa.compute.list_value_length(column), 0).to_numpy()
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = column.flatten().to_numpy(zero_copy_only=False)
    return values, offsets


def write_partitioned(path: str, table: pa.Table, partition: np.ndarray, partitions: int) -> None:
    """Write `table` as one Arrow IPC file whose record batch p holds the rows of partition p."""
    order = np.argsort(partition, kind="stable")
    bounds = np.zeros(partitions + 1, dtype=np.int64)
    np.cumsum(np.bincount(partition, minlength=partitions), out=bounds[1:])
    taken = table.take(pa.array(order))
    ordered = pa.RecordBatch.from_arrays(
        [column.combine_chunks() for column in taken.columns], schema=table.schema
    )
    with atomic_output(path) as sink, pa.ipc.new_file(sink, table.schema) as writer:
        for p in range(partitions):
            writer.write_batch(ordered.slice(bounds[p], bounds[p + 1] - bounds[p]))


def read_partition(paths: list[str], partition: int, schema: pa.Schema) -> pa.Table:
    """Record batch `partition` of every partitioned file, as one table."""
    batches = []
    for path in paths:
        with open_input(path) as source:
            batches.append(pa.ipc.open_file(source).get_batch(partition))
    if not batches:
        return schema.empty_table()
    return pa.Table.from_batches(batches, schema=schema).combine_chunks()


def distinct_edges(node: np.ndarray, other: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Edges sorted by (node, other), each once, without self-loops."""
    keep = node != other
    node, other = node[keep], other[keep]
    if len(node) and min(node.min(), other.min()) >= 0 and max(node.max(), other.max()) < 2**31:
        # Both in one int64 and a plain sort: about 15x faster here than lexsort's permutation.
        packed = np.sort((node << 32) | other)
        node, other = packed >> 32, packed & 0xFFFFFFFF
    else:
        order = np.lexsort((other, node))
        node, other = node[order], other[order]
    distinct = np.ones(len(node), dtype=bool)
    distinct[1:] = (node[1:] != node[:-1]) | (other[1:] != other[:-1])
    return node[distinct], other[distinct]


def write_edges(path: str, first: np.ndarray, second: np.ndarray, partitions: int) -> int:
    """Write undirected edges (first, second) in both directions, filed by node % partitions;
    returns the directed edges written."""
    node, other = distinct_edges(np.concatenate([first, second]), np.concatenate([second, first]))
    table = pa.table({"node": node, "other": other}, schema=EDGE_SCHEMA)
    write_partitioned(path, table, (node % partitions).astype(np.int64), partitions)
    return len(node)


@dataclass(frozen=True)
class PartitionKeys:
    """Map task: a group of summary files -> their (key, node) pairs, hash-partitioned into one
    IPC file named by the group's first file. One file per group, not per summary file: the
    edges step reads batch p of every pair file, files x partitions reads (each opens a file and
    parses its footer) that grew as the square of the corpus."""

    folder: str
    partitions: int

    def path(self, index: int) -> str:
        return posixpath.join(self.folder, f"{index:06d}.arrow")

    def __call__(self, group: Sequence[SourceFile]) -> tuple[int, int, dict[str, int]]:
        """Pairs written, peak memory, and the group's rows per source (`dataclean.dedup.alarms`;
        none for an earlier output's rows, which are not this run's)."""
        all_keys, all_nodes = [], []
        sources: Counter[str] = Counter()
        for source in group:
            summary = read_parquet(source.path, columns=["keys", "source"], schema=_KEYS_SOURCE)
            if not source.earlier:
                sources.update(source_counts(summary.column("source")))
            keys, offsets = flat_lists(summary.column("keys"))
            all_keys.append(keys.astype(np.uint64, copy=False))
            all_nodes.append(
                np.repeat(np.arange(source.offset, source.offset + source.rows), np.diff(offsets))
            )
            del summary
        keys, nodes = np.concatenate(all_keys), np.concatenate(all_nodes)
        del all_keys, all_nodes
        partition = (keys % np.uint64(self.partitions)).astype(np.int64)
        table = pa.table({"key": keys, "node": nodes}, schema=PAIR_SCHEMA)
        write_partitioned(self.path(group[0].index), table, partition, self.partitions)
        return len(keys), peak_memory_bytes(), dict(sources)


@dataclass(frozen=True)
class ReduceEdges:
    """Reduce task: partition p of every pair file -> star edges (member, bucket minimum), saved
    in both directions and filed by node, as the components' rounds read them
    (`dataclean.dedup.connect`)."""

    pair_files: tuple[str, ...]
    folder: str
    partitions: int

    def __call__(self, partition: int) -> tuple[int, int]:
        """(star edges found, peak memory)."""
        table = read_partition(list(self.pair_files), partition, PAIR_SCHEMA)
        keys = table.column("key").to_numpy()
        nodes = table.column("node").to_numpy()
        del table
        edges = star_edges(keys, nodes)
        path = posixpath.join(self.folder, f"{partition:05d}.arrow")
        write_edges(path, edges[:, 0], edges[:, 1], self.partitions)
        return len(edges), peak_memory_bytes()


def star_edges(keys: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """Edges (node, smallest node sharing its key) for every bucket of two or more, deduplicated."""
    if len(keys) == 0:
        return np.empty((0, 2), dtype=np.int64)
    # Most keys are held by one row: find the shared ones with a sort of the keys alone (a plain
    # 64-bit sort is about 20x faster here than the permutation of an argsort), and order only
    # the pairs that carry one.
    shared_keys = repeated(np.sort(keys))
    if len(shared_keys) == 0:
        return np.empty((0, 2), dtype=np.int64)
    rank = positions(shared_keys, keys)
    carried = rank >= 0
    rank, nodes = rank[carried], nodes[carried]
    if len(nodes) and nodes.min() >= 0 and nodes.max() < 2**32:  # (key rank, node) in one sort
        packed = np.sort((rank << 32) | nodes)
        keys, nodes = packed >> 32, packed & 0xFFFFFFFF
    else:
        order = np.lexsort((nodes, rank))
        keys, nodes = rank[order], nodes[order]
    first = np.ones(len(keys), dtype=bool)
    first[1:] = keys[1:] != keys[:-1]
    starts = np.flatnonzero(first)
    sizes = np.diff(np.append(starts, len(keys)))
    shared = np.repeat(sizes > 1, sizes)  # only buckets of two or more make edges
    if not shared.any():
        return np.empty((0, 2), dtype=np.int64)
    nodes = nodes[shared]
    sizes = sizes[sizes > 1]
    bucket_starts = np.zeros(len(sizes), dtype=np.int64)
    np.cumsum(sizes[:-1], out=bucket_starts[1:])
    minimum = np.repeat(np.minimum.reduceat(nodes, bucket_starts), sizes)
    joined = nodes != minimum
    node, other = distinct_edges(nodes[joined], minimum[joined])
    return np.stack([node, other], axis=1)
