"""Contamination per eval set, from `OUT/contamination.parquet` (the decontaminate stage's records).

Per eval set: the corpus rows that share n-grams with it, the eval items they touch, the matched
n-grams in all, and the items touched by the most rows (a person checks those first: an item
found in many rows is often a common phrase, not a leak). None when the run had no such stage.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

import pyarrow.compute as pc

from dataclean.io.files import exists, read_parquet
from dataclean.io.layout import CONTAMINATION
from dataclean.report.scan import Output


@dataclass(frozen=True)
class EvalSetContamination:
    """One eval set's share of the contamination records."""

    name: str
    rows: int
    items: int
    ngrams: int
    top_items: list[tuple[str, int]]


def contamination_summary(output: Output, top: int = 5) -> list[EvalSetContamination] | None:
    """Per eval set, most contaminating first; None without `contamination.parquet`."""
    path = posixpath.join(output.root, CONTAMINATION)
    if not exists(path):
        return None
    table = read_parquet(path, columns=["id", "eval_set", "eval_item", "matched_ngrams"])
    found = []
    for name in sorted(set(table.column("eval_set").to_pylist())):
        part = table.filter(pc.equal(table.column("eval_set"), name))
        by_item = part.group_by("eval_item").aggregate([("id", "count_distinct")])
        by_item = by_item.sort_by([("id_count_distinct", "descending"), ("eval_item", "ascending")])
        items, rows = by_item.column("eval_item").to_pylist(), by_item.column("id_count_distinct").to_pylist()
        top_items = list(zip(items[:top], rows[:top], strict=True))
        found.append(
            EvalSetContamination(
                name=name,
                rows=len(pc.unique(part.column("id"))),
                items=by_item.num_rows,
                ngrams=int(pc.sum(part.column("matched_ngrams")).as_py() or 0),
                top_items=top_items,
            )
        )
    return sorted(found, key=lambda s: -s.rows)
