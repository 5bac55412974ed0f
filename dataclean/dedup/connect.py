"""Connected components of the candidate graph on the executor: large-star / small-star rounds.

The graph's edges live in hash-partitioned Arrow files, each edge in both directions, filed by
its first node (record batch p of a file holds the edges whose node % partitions == p). A round
is a map over partitions (`StarRound`): task p reads batch p of every file of the previous round,
groups the edges by node and applies one of the two operations of Kiveris et al., "Connected
Components in MapReduce and Beyond" (SoCC 2014), which keep every component connected and
converge, in O(log^2 n) rounds, to one star per component centred on its smallest node:

- large-star: for each node u and m = min(u, its neighbours), link each neighbour v > u to m;
- small-star: for each node u, m = min(u, its neighbours v < u), link u and each such v to m.

Rounds alternate, large first. The stopping test is exact and local: a graph is a set of stars
centred on their smallest nodes exactly when no node both has a smaller neighbour and more than
one neighbour (a node with a smaller neighbour m and only that one is a leaf, and m, having the
larger neighbour u, cannot itself be a leaf). Each task counts such nodes in its input; a round
whose tasks count none found its input finished, and the labels are read from it. More than
`MAX_ROUNDS` rounds is an error, never an early stop (a partial result would merge nothing
wrong but would change decisions silently).

Each round's files go to a folder of their own under the fit's scratch folder (`OUT/_work`),
with a `done.json` the driver writes once every task of the round has finished, holding a
fingerprint of the inputs (summary files, their sizes, partition count): a restarted fit with
the same fingerprint starts after the last complete round instead of from the summaries.

A task reads its partition in pieces of at most `pieces.PIECE_EDGES` rows, in (node, other)
order (`dataclean.dedup.pieces`), so its memory is one piece's even when one node holds millions
of edges (the centre of a percolating component's star), and writes a file per piece.

`LabelNodes` turns the stars into labels: for every node with an edge, its component's smallest
node, filed by the summary file the node belongs to, so each gather task reads only its file's.
The driver keeps nothing per row: per round, one count per task; per summary file, its count of
labelled rows.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from dataclean.dedup.partition import (
    peak_memory_bytes,
    read_partition,
    write_edges,
    write_partitioned,
)
from dataclean.dedup.pieces import PIECE_EDGES, edge_pieces
from dataclean.executors.base import Executor
from dataclean.io.files import exists, fresh_folder, list_files, remove_tree
from dataclean.io.writers import read_json, write_json

LABEL_SCHEMA = pa.schema([pa.field("node", pa.int64()), pa.field("root", pa.int64())])
MAX_ROUNDS = 200  # far above O(log^2 n) for any n this machine holds
DONE = "done.json"


def _groups(node: np.ndarray, other: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For sorted distinct edges: per edge, its node's group index; per group, its node and
    m = min(node, its smallest neighbour)."""
    first = np.ones(len(node), dtype=bool)
    first[1:] = node[1:] != node[:-1]
    starts = np.flatnonzero(first)
    group = np.cumsum(first) - 1
    nodes = node[starts]
    return group, nodes, np.minimum(nodes, other[starts])  # sorted: a group's first is its smallest


@dataclass(frozen=True)
class StarRound:
    """Map task: one large-star or small-star step over partition p's edges (module docstring).

    The partition is read in pieces of at most `limit` rows (`dataclean.dedup.pieces`), and the
    edges made are written to a new file each time about `limit` are held, so a node with
    millions of edges costs a task a piece and a file's worth at a time: a node whose edges
    span pieces keeps, from its first piece, its smallest neighbour and its edge count, which
    is all the step needs. The edges written are the same set whatever the pieces (a few
    written twice, in two files: the next round reads them once)."""

    inputs: tuple[str, ...]
    folder: str
    partitions: int
    large: bool
    limit: int = PIECE_EDGES

    def path(self, partition: int, part: int = 0) -> str:
        return posixpath.join(self.folder, f"{partition:05d}-{part:05d}.arrow")

    def _write(self, partition: int, part: int, held: list[tuple[np.ndarray, np.ndarray]]) -> int:
        first = np.concatenate([pair[0] for pair in held]) if held else np.zeros(0, np.int64)
        second = np.concatenate([pair[1] for pair in held]) if held else np.zeros(0, np.int64)
        return write_edges(self.path(partition, part), first, second, self.partitions)

    def __call__(self, partition: int) -> tuple[int, int, int]:
        """(nodes of the input not yet in a finished star, directed edges written, peak memory)."""
        unfinished = written = files = 0
        carried: tuple[int, int, int] | None = None  # the last node read: (node, m, edges so far)
        held: list[tuple[np.ndarray, np.ndarray]] = []  # edges made, written once `limit` are held
        for node, other in edge_pieces(self.inputs, partition, self.limit):
            if len(node) == 0:
                continue
            group, nodes, smallest = _groups(node, other)
            sizes = np.bincount(group)
            if carried is not None and carried[0] == nodes[0]:  # its first piece had its smallest
                smallest[0] = carried[1]
                sizes[0] += carried[2]
            elif carried is not None:
                unfinished += int(carried[1] < carried[0] and carried[2] > 1)
            # A node is counted once all its edges are read: the last one may go on in the next piece.
            unfinished += int(np.count_nonzero((smallest[:-1] < nodes[:-1]) & (sizes[:-1] > 1)))
            carried = (int(nodes[-1]), int(smallest[-1]), int(sizes[-1]))
            m = smallest[group]
            if self.large:  # each neighbour v > u to m(u)
                larger = other > node
                held.append((other[larger], m[larger]))
            else:  # each neighbour v < u, and u itself, to m(u) (the smallest of u and those)
                smaller = other < node
                held.append((np.concatenate([other[smaller], nodes]), np.concatenate([m[smaller], smallest])))
            if sum(len(first) for first, _ in held) >= self.limit // 2:  # written in both directions
                written += self._write(partition, files, held)
                files += 1
                held = []
        if carried is not None:
            unfinished += int(carried[1] < carried[0] and carried[2] > 1)
        if held or files == 0:  # every partition leaves a file, so a round's files are complete
            written += self._write(partition, files, held)
        return unfinished, written, peak_memory_bytes()


@dataclass(frozen=True)
class LabelNodes:
    """Map task: partition p of the finished stars -> (node, root) filed by summary file, read
    in pieces as `StarRound` reads them (a node spanning pieces takes its root from its first).

    `starts` are the summary files' first node numbers, in order (`SourceFile.offset`); record
    batch i of the output holds the labels of file i's nodes."""

    inputs: tuple[str, ...]
    folder: str
    starts: tuple[int, ...]
    limit: int = PIECE_EDGES

    def path(self, partition: int) -> str:
        return posixpath.join(self.folder, f"{partition:05d}.arrow")

    def __call__(self, partition: int) -> tuple[list[int], int]:
        """(labelled nodes per summary file, peak memory)."""
        found_nodes, found_roots = [], []
        last = -1  # the last node labelled: its edges may go on in the next piece
        for node, other in edge_pieces(self.inputs, partition, self.limit):
            if len(node) == 0:
                continue
            _, nodes, roots = _groups(node, other)
            fresh = nodes != last  # only the first node of a piece can be the last one's
            found_nodes.append(nodes[fresh])
            found_roots.append(roots[fresh])
            last = int(nodes[-1])
        nodes = np.concatenate(found_nodes) if found_nodes else np.zeros(0, np.int64)
        roots = np.concatenate(found_roots) if found_roots else np.zeros(0, np.int64)
        # Files without rows share their start with the next file: "right" picks the one with rows.
        owner = np.searchsorted(np.asarray(self.starts, dtype=np.int64), nodes, side="right") - 1
        labels = pa.table({"node": nodes, "root": roots}, schema=LABEL_SCHEMA)
        write_partitioned(self.path(partition), labels, owner.astype(np.int64), len(self.starts))
        return np.bincount(owner, minlength=len(self.starts)).tolist(), peak_memory_bytes()


def load_labels(label_files: Sequence[str], index: int, offset: int, rows: int) -> np.ndarray:
    """Summary file `index`'s labels: its component's smallest node per row, -1 when alone."""
    table = read_partition(list(label_files), index, LABEL_SCHEMA)
    labels = np.full(rows, -1, dtype=np.int64)
    labels[table.column("node").to_numpy() - offset] = table.column("root").to_numpy()
    return labels


def fingerprint(described: Any) -> str:
    """A short hash of what a fit's intermediate files depend on (JSON-serializable)."""
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:16]


class Rounds:
    """The persisted steps of one fit's components under `folder`: step 0 holds the edges the
    shuffle made (and its statistics), steps 1.. the rounds. A step counts once its `done.json`
    exists and carries this fit's fingerprint."""

    def __init__(self, folder: str, key: str) -> None:
        self.folder = folder
        self.fingerprint = key
        complete = self.complete()
        if not complete:
            fresh_folder(folder)
        self.resumed_from = complete[-1] if complete else None

    def step_folder(self, step: int) -> str:
        return posixpath.join(self.folder, f"step-{step:03d}")

    def complete(self) -> list[int]:
        """Steps 0, 1, ... done for this fingerprint, without a gap."""
        steps: list[int] = []
        while True:
            marker = posixpath.join(self.step_folder(len(steps)), DONE)
            if not exists(marker) or read_json(marker).get("fingerprint") != self.fingerprint:
                return steps
            steps.append(len(steps))

    def files(self, step: int) -> tuple[str, ...]:
        return tuple(list_files(self.step_folder(step), ".arrow"))

    def begin(self, step: int) -> str:
        return fresh_folder(self.step_folder(step))

    def finish(self, step: int, stats: dict[str, Any]) -> None:
        write_json(posixpath.join(self.step_folder(step), DONE), {"fingerprint": self.fingerprint, **stats})

    def stats(self, step: int) -> dict[str, Any]:
        found: dict[str, Any] = read_json(posixpath.join(self.step_folder(step), DONE))
        return found


def run_rounds(
    executor: Executor, rounds: Rounds, partitions: int, limit: int = PIECE_EDGES
) -> tuple[tuple[str, ...], int, int]:
    """Star rounds from the last complete step until one finds its input finished, each task
    reading at most `limit` rows at once.

    Returns the finished stars' files, the rounds run in all (resumed ones included), and the
    tasks' peak memory. Raises when `MAX_ROUNDS` rounds do not finish (never stops early).
    """
    step = rounds.complete()[-1]  # step 0, the edges, is always complete here
    peak = 0
    while step <= MAX_ROUNDS:
        current = rounds.files(step)
        task = StarRound(current, rounds.begin(step + 1), partitions, step % 2 == 0, limit)
        results = executor.map(task, range(partitions), light=True)
        peak = max([peak, *(found_peak for _, _, found_peak in results)])
        unfinished = sum(count for count, _, _ in results)
        if unfinished == 0:  # the input was finished: this round's output is the same stars
            remove_tree(task.folder)
            return current, step, peak
        edges = sum(count for _, count, _ in results)
        rounds.finish(step + 1, {"unfinished_nodes": unfinished, "edges": edges})
        step += 1
    raise RuntimeError(
        f"dedup: connected components not finished after {MAX_ROUNDS} large-star/small-star rounds "
        f"(folder {rounds.folder}); refusing to stop early"
    )
