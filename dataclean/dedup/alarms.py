"""What a person should look at after dedup: the largest clusters, and sources that lost most.

A cluster is a kept row and every row dropped as its duplicate (`exact_of:<kept id>`,
`near_duplicate_of:<kept id>`). Each clustering task reports its partition's largest clusters
(`largest_clusters`: size, exact and near counts, a few member ids in keep order, the kept id);
the driver keeps the corpus's largest (`merge_largest`: size, then kept id, so the list does not
depend on the partition count). A cluster never spans two partitions (it is inside a component).

With a source column in the input (`source`, else `domain`: `SOURCE_COLUMNS`), each map task
counts its rows per source and each clustering task its dropped rows per source; `source_shares`
gives each source's share removed. `warnings` turns both into lines for the end of the run: a
cluster of `cluster_size` rows or more, a source losing `source_share` of its rows or more.
Per-source counts are dropped (with a note) past `MAX_SOURCES` distinct values: a per-domain
column of a web crawl has millions, and the driver keeps nothing that grows with the corpus.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean import columns as C

SOURCE_COLUMNS = (C.SOURCE, C.DOMAIN)
LARGEST = 10  # clusters listed in stats.json and the report
MEMBERS = 5  # member ids shown per cluster
MAX_SOURCES = 10_000
LISTED_SOURCES = 100  # sources listed in stats.json: those that lost the largest share
MIN_SOURCE_ROWS = 20  # a source smaller than this never warns (one row of one is 100%)


def largest_clusters(
    ids: pa.Array | pa.ChunkedArray, kind: np.ndarray, target: np.ndarray, dropped_kinds: Sequence[int]
) -> list[dict[str, Any]]:
    """The `LARGEST` largest clusters of one partition's decisions (rows in keep order)."""
    rows, sizes = _named(kind, target, dropped_kinds)
    if len(rows) == 0:
        return []
    keepers = np.flatnonzero(sizes)
    table = pa.table({"kept": ids.take(pa.array(keepers)), "size": sizes[keepers] + 1, "row": keepers})
    top = table.sort_by([("size", "descending"), ("kept", "ascending")]).slice(0, LARGEST)
    exact_kind = min(dropped_kinds)  # EXACT sorts before NEAR (dataclean.dedup.verify)
    clusters = []
    for kept, size, row in zip(
        *(top.column(name).to_pylist() for name in ("kept", "size", "row")), strict=True
    ):
        members = rows[target[rows] == row]
        clusters.append(
            {
                "kept": kept,
                "size": int(size),
                "exact": int(np.sum(kind[members] == exact_kind)),
                "near": int(np.sum(kind[members] != exact_kind)),
                "members": ids.take(pa.array(members[:MEMBERS])).to_pylist(),
            }
        )
    return clusters


def cluster_sizes(kind: np.ndarray, target: np.ndarray, dropped_kinds: Sequence[int]) -> dict[int, int]:
    """How many clusters of each size (the kept row and the rows naming it) one partition's
    decisions hold: the report's size counts without a table of every kept id on the driver."""
    _, named = _named(kind, target, dropped_kinds)
    sizes, clusters = np.unique(named[named > 0] + 1, return_counts=True)
    return {int(size): int(count) for size, count in zip(sizes, clusters, strict=True)}


def _named(
    kind: np.ndarray, target: np.ndarray, dropped_kinds: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """The dropped rows, and per row how many dropped rows name it as their kept row."""
    rows = np.flatnonzero(np.isin(kind, dropped_kinds))
    return rows, np.bincount(target[rows], minlength=len(kind))


def merge_largest(parts: Iterable[Sequence[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The largest clusters of all partitions: by size, then kept id."""
    merged = [cluster for part in parts for cluster in part]
    return sorted(merged, key=lambda cluster: (-cluster["size"], cluster["kept"]))[:LARGEST]


def source_counts(column: pa.Array | pa.ChunkedArray, mask: np.ndarray | None = None) -> dict[str, int]:
    """Rows per source value (null sources are not counted), of the rows in `mask` if given."""
    if mask is not None:
        column = column.filter(pa.array(mask))
    counts = pc.value_counts(pc.drop_null(column))
    if isinstance(counts, pa.ChunkedArray):
        counts = counts.combine_chunks()
    return {str(value): int(count) for value, count in zip(*counts.flatten(), strict=True) if value.is_valid}


def add_counts(total: Counter[str] | None, part: Mapping[str, int]) -> Counter[str] | None:
    """Add a task's per-source counts; None once past `MAX_SOURCES` (no longer counted)."""
    if total is None:
        return None
    total.update(part)
    return total if len(total) <= MAX_SOURCES else None


def source_shares(rows: Counter[str] | None, removed: Counter[str] | None) -> list[dict[str, Any]] | None:
    """Per source: rows that reached dedup, rows it removed and their share, the largest shares
    first (at most `LISTED_SOURCES`); None when the input has no source column or too many."""
    if rows is None or removed is None or not rows:
        return None
    ranked = sorted(rows.items(), key=lambda item: (-removed.get(item[0], 0) / item[1], item[0]))
    return [
        {
            "source": name,
            "rows": count,
            "removed": removed.get(name, 0),
            "share": round(removed.get(name, 0) / count, 4),
        }
        for name, count in ranked[:LISTED_SOURCES]
    ]


def warnings(
    largest: Sequence[dict[str, Any]],
    shares: Sequence[dict[str, Any]] | None,
    cluster_size: int,
    source_share: float,
) -> list[str]:
    """End-of-run warning lines: clusters of `cluster_size` rows or more, sources (of at least
    `MIN_SOURCE_ROWS` rows) that lost `source_share` of their rows or more."""
    lines = []
    for cluster in largest:
        if cluster["size"] >= cluster_size:
            members = ", ".join(cluster["members"])
            lines.append(
                f"dedup: a cluster of {cluster['size']:,} rows keeps only {cluster['kept']} "
                f"(members include {members}); check it is not a template or boilerplate"
            )
    for item in shares or ():
        if item["rows"] >= MIN_SOURCE_ROWS and item["share"] >= source_share:
            lines.append(
                f"dedup: source {item['source']} lost {item['share']:.0%} of its rows to dedup "
                f"({item['removed']:,} of {item['rows']:,})"
            )
    return lines
