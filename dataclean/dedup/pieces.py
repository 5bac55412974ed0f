"""One partition of the edge files, read in bounded pieces in (node, other) order.

The components' rounds file every edge under its node (`dataclean.dedup.connect`), so a node's
edges all land in one partition. That is flat in the corpus only while no node has a large share
of them, and a percolating candidate graph has one: the centre of its giant star (at 10M short
documents a component of 5.4M rows, whose smallest node collects millions of edges), and the
task of its partition held them all (1,434 MB at 10M against about 500 MB at 1M).

Each file's record batch for a partition is sorted by (node, other) and holds each edge once
(`partition.write_edges`), so the partition can be read as a merge of sorted runs: a piece is
every file's rows between two keys, chosen so that no file gives more than its share of
`limit` rows, hence at most `limit` rows in all. Equal edges of different files fall in the same
piece, so a piece's distinct edges are the partition's between those keys. A node's edges may
span pieces, in order: the first piece holding a node holds its smallest neighbour, which is
all a round needs of the edges it has not seen yet (`connect.StarRound` carries it over).
A partition of at most `limit` rows is read whole, as before.

Memory: one piece (16 B a row read, plus what a round makes of it), whatever a node's degree.
Each file is opened (memory-mapped locally) and closed again for each piece, so the pages a piece
touched do not stay mapped into the task: it costs one open per file and piece, and a partition
larger than `limit` is the only one read this way.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import numpy as np
import pyarrow as pa

from dataclean.dedup.partition import EDGE_SCHEMA, distinct_edges, read_partition
from dataclean.io.files import open_input

# The most rows of a partition's files held at once (16 B each: 16 MB of them as read; a round
# makes of a piece about 150 B a row at its peak, sorts and the edges it writes included).
PIECE_EDGES = 1 << 20


def _columns(stack: ExitStack, path: str, partition: int) -> tuple[np.ndarray, np.ndarray]:
    """(node, other) of record batch `partition` of an edge file, views of its mapped pages."""
    source = stack.enter_context(open_input(path))
    batch = pa.ipc.open_file(source).get_batch(partition)
    return batch.column("node").to_numpy(), batch.column("other").to_numpy()


def _position(node: np.ndarray, other: np.ndarray, key: tuple[int, int]) -> int:
    """The first row at or after `key` in rows sorted by (node, other)."""
    low = int(np.searchsorted(node, key[0], side="left"))
    high = int(np.searchsorted(node, key[0], side="right"))
    return low + int(np.searchsorted(other[low:high], key[1], side="left"))


def edge_pieces(
    paths: tuple[str, ...], partition: int, limit: int = PIECE_EDGES
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The distinct edges of record batch `partition` of every file, sorted by (node, other),
    in pieces of at most `limit` rows read, each piece after the one before."""
    sizes = []
    for path in paths:
        with ExitStack() as stack:
            sizes.append(len(_columns(stack, path, partition)[0]))
    if sum(sizes) <= limit:
        table = read_partition(list(paths), partition, EDGE_SCHEMA)
        whole = distinct_edges(table.column("node").to_numpy(), table.column("other").to_numpy())
        del table  # not held while the caller works on the piece
        yield whole
        return
    starts = [0] * len(paths)
    while True:
        live = [number for number in range(len(paths)) if starts[number] < sizes[number]]
        if not live:
            return
        share = max(1, limit // len(live))
        with ExitStack() as stack:
            columns = {number: _columns(stack, paths[number], partition) for number in live}
            # The piece ends at the smallest key lying `share` rows into a file: no file gives
            # more than `share` rows, and the file holding that key gives exactly `share`.
            bound: tuple[int, int] | None = None
            for number in live:
                at = starts[number] + share
                if at < sizes[number]:
                    node, other = columns[number]
                    key = (int(node[at]), int(other[at]))
                    bound = key if bound is None else min(bound, key)
            nodes, others = [], []
            moved = False
            for number in live:
                node, other = columns[number]
                end = sizes[number] if bound is None else _position(node, other, bound)
                nodes.append(np.array(node[starts[number] : end]))  # copied before the file closes
                others.append(np.array(other[starts[number] : end]))
                moved |= end > starts[number]
                starts[number] = end
        if not moved:  # rows of a file are distinct and sorted (`write_edges`), so never here
            raise RuntimeError(f"dedup: edge files of partition {partition} are not sorted and distinct")
        # Nothing of the files (their views keep the maps alive) nor the copies is held while
        # the caller works on the piece.
        del columns, node, other
        piece = distinct_edges(np.concatenate(nodes), np.concatenate(others))
        del nodes, others
        yield piece
