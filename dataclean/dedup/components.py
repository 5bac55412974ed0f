"""Connected components of an edge list in one process: union-find over dense integer nodes.

The fit used to merge its edges here, on the driver (9 bytes per row); it now runs large-star /
small-star rounds on the executor (`dataclean.dedup.connect`). This stays as the reference the
tests check those rounds against.

Memory: 8 bytes per node (one int64 parent array, reused for the labels) plus 1 byte per node
while labelling, plus the edges of one partition at a time;
no ids, signatures or texts. Roots are the smallest node of each component (union links the
larger root under the smaller one), so `parent[i] <= i` always holds and one forward pass
flattens every node to its root.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from dataclean.jit import helper


@helper
def _find(parent: np.ndarray, node: int) -> int:
    while parent[node] != node:
        parent[node] = parent[parent[node]]  # path halving
        node = parent[node]
    return node


@nb.njit(cache=True, nogil=True)
def _union_edges(parent: np.ndarray, edges: np.ndarray) -> int:
    merged = 0
    for i in range(edges.shape[0]):
        a = _find(parent, edges[i, 0])
        b = _find(parent, edges[i, 1])
        if a != b:
            if a < b:
                parent[b] = a
            else:
                parent[a] = b
            merged += 1
    return merged


@nb.njit(cache=True, nogil=True)
def _flatten(parent: np.ndarray) -> None:
    for i in range(len(parent)):
        parent[i] = parent[parent[i]]


@nb.njit(cache=True, nogil=True)
def _label_in_place(parent: np.ndarray, grouped: np.ndarray) -> None:
    """-1 for each node alone in its component; `grouped` is zeros (`dataclean.jit`)."""
    for i in range(len(parent)):
        if parent[i] != i:
            grouped[i] = True
            grouped[parent[i]] = True
    for i in range(len(parent)):
        if not grouped[i]:
            parent[i] = -1


class Components:
    """Union-find over nodes 0..n-1, fed edge arrays (m x 2 int64) as they arrive."""

    def __init__(self, nodes: int) -> None:
        self.parent = np.arange(nodes, dtype=np.int64)
        self.merges = 0

    def add(self, edges: np.ndarray) -> None:
        """Merge the components joined by `edges`."""
        if len(edges):
            self.merges += int(_union_edges(self.parent, np.ascontiguousarray(edges, np.int64)))

    def roots(self) -> np.ndarray:
        """Each node's component root (its smallest node); flattens in place, no copy."""
        _flatten(self.parent)
        return self.parent

    def labels(self) -> np.ndarray:
        """Each node's root, or -1 for a node alone in its component.

        Computed in place (1 extra byte per node): the union-find is spent afterwards.
        """
        _flatten(self.parent)
        _label_in_place(self.parent, np.zeros(len(self.parent), dtype=np.bool_))
        return self.parent
