"""Duplicate clusters: how many rows each kept row stood for, exact and near.

A dropped duplicate's reason names the row it duplicates (`dedup:exact_of:<id>`,
`dedup:near_duplicate_of:<id>`); a cluster is that kept row plus every row naming it, so its size
is 1 + the rows naming it. Near duplicates also carry their similarity (`dup_jaccard`), shown
against the stage's `threshold`. Kept rows of a cluster carry `dup_cluster` (their own id).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean import columns as C
from dataclean.io.layout import DATA, EXCLUDED
from dataclean.report.histogram import LinearHistogram
from dataclean.report.scan import Output, tables

PATTERN = r"(?s)^(?P<stage>[^:]*):(?P<kind>exact_of|near_duplicate_of):(?P<target>.*)$"
EXACT, NEAR = "exact_of", "near_duplicate_of"


@dataclass
class Cluster:
    kept_id: str
    exact: int
    near: int

    @property
    def size(self) -> int:
        return 1 + self.exact + self.near


@dataclass
class ClusterSummary:
    """Cluster size counts, the largest clusters, and the near duplicates' similarities."""

    sizes: dict[int, int] = field(default_factory=dict)
    exact: int = 0
    near: int = 0
    largest: list[Cluster] = field(default_factory=list)
    jaccard: LinearHistogram = field(default_factory=LinearHistogram)
    threshold: float | None = None
    kept_with_cluster: int = 0
    # From the dedup fit's statistics in stats.json (`dataclean.dedup.alarms`): a few member ids
    # of the largest clusters by kept id, each source's share removed, the run's warning lines.
    members: dict[str, list[str]] = field(default_factory=dict)
    source_shares: list[dict[str, Any]] | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def clusters(self) -> int:
        return sum(self.sizes.values())


def cluster_summary(output: Output, largest: int = 10) -> ClusterSummary | None:
    """None when the run has neither a dedup stage nor duplicate drops.

    The sizes and the largest clusters come from the dedup fit's statistics when they account
    for every duplicate the exclusion log holds (`_fit_sizes`): counting them from the log needs
    a table of every kept id that has duplicates, which grew with the corpus (400 MB at 10M
    documents with 1.1M such ids) and was the driver's peak. Else they are counted from the log.
    """
    summary = ClusterSummary()
    deduplicator = output.producer(C.DUP_CLUSTER)
    fit = output.stage_stats(deduplicator).get("fit") or {}
    from_fit = _fit_sizes(output, fit, largest)
    partial: list[pa.Table] = []
    for table in tables(output.files[EXCLUDED], [C.REASON, C.DUP_SCORE]):
        if C.REASON not in table.column_names:
            continue
        found = pc.extract_regex(table.column(C.REASON).fill_null(""), PATTERN)
        matched = pc.is_valid(found)
        if not pc.any(matched).as_py():
            continue
        if from_fit is None:
            found = found.filter(matched)
            kinds = pc.struct_field(found, "kind")
            partial.append(
                pa.table({"target": pc.struct_field(found, "target"), "kind": kinds})
                .group_by(["target", "kind"])
                .aggregate([([], "count_all")])
            )
        if C.DUP_SCORE in table.column_names:
            near = pc.and_(matched, pc.match_substring(table.column(C.REASON).fill_null(""), f":{NEAR}:"))
            scores = table.column(C.DUP_SCORE).filter(near).cast(pa.float64()).fill_null(np.nan)
            summary.jaccard.add(scores.to_numpy())
    for table in tables(output.files[DATA], [C.DUP_CLUSTER]):
        column = table.column(C.DUP_CLUSTER)
        summary.kept_with_cluster += len(column) - column.null_count
    if from_fit is not None:
        summary.sizes, summary.exact, summary.near, summary.largest = from_fit
    elif not partial and deduplicator is None:
        return None
    if partial:
        counts = pa.concat_tables(partial).group_by(["target", "kind"]).aggregate([("count_all", "sum")])
        is_exact = pc.equal(counts.column("kind"), EXACT)
        number = counts.column("count_all_sum")
        per_target = (
            pa.table(
                {
                    "target": counts.column("target"),
                    EXACT: pc.if_else(is_exact, number, 0),
                    NEAR: pc.if_else(is_exact, 0, number),
                }
            )
            .group_by("target")
            .aggregate([(EXACT, "sum"), (NEAR, "sum")])
        )
        exact = per_target.column(f"{EXACT}_sum").to_numpy()
        near = per_target.column(f"{NEAR}_sum").to_numpy()
        sizes, clusters = np.unique(1 + exact + near, return_counts=True)
        summary.sizes = {int(size): int(n) for size, n in zip(sizes, clusters, strict=True)}
        summary.exact, summary.near = int(exact.sum()), int(near.sum())
        ranked = per_target.append_column("size", pa.array(1 + exact + near))
        top = ranked.sort_by([("size", "descending"), ("target", "ascending")]).slice(0, largest)
        summary.largest = [
            Cluster(str(target), int(e), int(n))
            for target, e, n in zip(*(top.column(i).to_pylist() for i in range(3)), strict=True)
        ]
    summary.members = {cluster["kept"]: cluster["members"] for cluster in fit.get("largest_clusters", [])}
    summary.source_shares = fit.get("source_shares")
    summary.warnings = list(fit.get("warnings", []))
    threshold = output.stage_params(deduplicator).get("threshold")
    summary.threshold = float(threshold) if isinstance(threshold, (int, float)) else None
    return summary


def _fit_sizes(
    output: Output, fit: dict[str, Any], largest: int
) -> tuple[dict[int, int], int, int, list[Cluster]] | None:
    """(sizes, exact, near, largest clusters) from a dedup fit's statistics (`cluster_sizes`,
    `largest_clusters`, `dataclean.dedup.alarms`), or None when the fit has no size counts or
    its duplicates are not all the run's (the run's reason counts hold others: another stage's,
    or rows of an earlier run), so that the log must be counted."""
    if "cluster_sizes" not in fit:
        return None
    exact, near = int(fit.get(EXACT, 0)), int(fit.get(NEAR, 0))
    reasons = output.stats.get("reasons", {})
    in_log = sum(count for reason, count in reasons.items() if reason.split(":")[-1] in (EXACT, NEAR))
    sizes = {int(size): int(count) for size, count in fit["cluster_sizes"]}
    if in_log != exact + near or sum((size - 1) * count for size, count in sizes.items()) != in_log:
        return None
    top = [Cluster(str(c["kept"]), int(c["exact"]), int(c["near"])) for c in fit.get("largest_clusters", [])]
    return sizes, exact, near, top[:largest]
