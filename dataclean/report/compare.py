"""What changed between an earlier run and this one: counts by reason, and which ids moved.

Counts per reason come from both runs' stats. Ids are compared as 64-bit hashes (8 bytes per kept
row, so two runs of a hundred million rows compare in a few GB at most): a kept id lost is looked
up among this run's dropped rows to say why it left (or that it is no longer among the rows at
all: removed from the input, or split into chunks with other ids); a kept id gained is looked up
among the earlier run's dropped rows to say why it was dropped then. Quarantined ids of this run
that the earlier run did not quarantine are listed with their reasons.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from dataclean import columns as C
from dataclean.io.layout import DATA, EXCLUDED, QUARANTINED
from dataclean.report.scan import Output, id_hashes, reason_kinds, tables

NOT_FOUND_NOW = "not among this run's rows (left the input, or split into other ids)"
NOT_FOUND_BEFORE = "not among the earlier run's rows (new input, or new chunk ids)"
TOTALS = ("rows_in", "rows_added", "kept", "excluded", "quarantined")


class Example(NamedTuple):
    hash: int
    id: str
    reason: str


@dataclass
class Moved:
    """Ids that moved for one reason: how many, and a few of them (smallest hashes first)."""

    reason: str
    count: int = 0
    examples: list[Example] = field(default_factory=list)

    def add(self, hashes: np.ndarray, ids: list[str], reasons: list[str], keep: int) -> None:
        self.count += len(ids)
        self.examples.extend(Example(*row) for row in zip(hashes.tolist(), ids, reasons, strict=True))
        self.examples.sort()
        del self.examples[keep:]


@dataclass
class Comparison:
    """Both runs' totals and reason counts, and the ids that moved between kept and dropped."""

    earlier: str
    totals: list[tuple[str, int, int]]
    reasons: list[tuple[str, int, int]]
    lost: list[Moved]
    gained: list[Moved]
    newly_quarantined: Moved


def _hash_set(files: list[str]) -> np.ndarray:
    """Sorted unique id hashes of every row in `files`."""
    parts = [id_hashes(table.column(C.ID)) for table in tables(files, [C.ID]) if C.ID in table.column_names]
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.uint64)


def _member(hashes: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    if len(sorted_set) == 0:
        return np.zeros(len(hashes), dtype=bool)
    position = np.minimum(np.searchsorted(sorted_set, hashes), len(sorted_set) - 1)
    return np.asarray(sorted_set[position] == hashes)


def _explain(
    wanted: np.ndarray, dropped_files: list[str], kept_files: list[str], missing: str, keep: int
) -> list[Moved]:
    """Group the `wanted` id hashes (of rows in `kept_files`) by their reason in `dropped_files`."""
    moved: dict[str, Moved] = {}
    found: list[np.ndarray] = []
    for table in tables(dropped_files, [C.ID, C.REASON]):
        if C.ID not in table.column_names or C.REASON not in table.column_names:
            continue
        hashes = id_hashes(table.column(C.ID))
        rows = np.flatnonzero(_member(hashes, wanted))
        if not len(rows):
            continue
        found.append(hashes[rows])
        picked = table.take(pa.array(rows))
        kinds = np.asarray(reason_kinds(picked.column(C.REASON)).to_pylist(), dtype=object)
        ids, reasons = picked.column(C.ID).to_pylist(), picked.column(C.REASON).to_pylist()
        for kind in sorted(set(kinds.tolist())):
            at = np.flatnonzero(kinds == kind)
            entry = moved.setdefault(kind, Moved(kind))
            entry.add(hashes[rows][at], [ids[i] for i in at], [reasons[i] for i in at], keep)
    seen = np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.uint64)
    unexplained = wanted[~_member(wanted, seen)]
    result = sorted(moved.values(), key=lambda m: (-m.count, m.reason))
    if len(unexplained):
        result.append(_named(Moved(missing, len(unexplained)), unexplained[:keep], kept_files))
    return result


def _named(moved: Moved, hashes: np.ndarray, files: list[str]) -> Moved:
    """`moved` with the ids of `hashes` (a few, sorted) found in `files` as its examples."""
    for table in tables(files, [C.ID]):
        if C.ID not in table.column_names:
            continue
        row_hashes = id_hashes(table.column(C.ID))
        rows = np.flatnonzero(_member(row_hashes, hashes))
        ids = table.column(C.ID).take(pa.array(rows)).to_pylist()
        moved.examples.extend(Example(int(row_hashes[r]), str(i), "") for r, i in zip(rows, ids, strict=True))
    moved.examples = sorted(set(moved.examples))[: len(hashes)]
    return moved


def _counts(pairs: Iterable[tuple[str, int]], earlier: dict[str, int]) -> list[tuple[str, int, int]]:
    now = dict(pairs)
    names = list(dict.fromkeys([*now, *earlier]))
    return [(name, earlier.get(name, 0), now.get(name, 0)) for name in names]


def compare_runs(now: Output, earlier: Output, examples: int = 5, quarantined: int = 50) -> Comparison:
    """The differences between `earlier` and `now` (see the module docstring)."""
    kept_now, kept_before = _hash_set(now.files[DATA]), _hash_set(earlier.files[DATA])
    lost = np.setdiff1d(kept_before, kept_now, assume_unique=True)
    gained = np.setdiff1d(kept_now, kept_before, assume_unique=True)
    dropped_now = now.files[EXCLUDED] + now.files[QUARANTINED]
    dropped_before = earlier.files[EXCLUDED] + earlier.files[QUARANTINED]
    quarantined_before = _hash_set(earlier.files[QUARANTINED])
    newly = Moved("newly quarantined")
    for table in tables(now.files[QUARANTINED], [C.ID, C.REASON]):
        hashes = id_hashes(table.column(C.ID))
        rows = np.flatnonzero(~_member(hashes, quarantined_before))
        picked = table.take(pa.array(rows))
        reasons = picked.column(C.REASON).to_pylist() if C.REASON in picked.column_names else [""] * len(rows)
        newly.add(hashes[rows], picked.column(C.ID).to_pylist(), reasons, quarantined)
    totals_now, totals_before = now.stats.get("totals", {}), earlier.stats.get("totals", {})
    return Comparison(
        earlier=earlier.root,
        totals=[(name, int(totals_before.get(name, 0)), int(totals_now.get(name, 0))) for name in TOTALS],
        reasons=_counts(now.stats.get("reasons", {}).items(), dict(earlier.stats.get("reasons", {}))),
        lost=_explain(lost, dropped_now, earlier.files[DATA], NOT_FOUND_NOW, examples),
        gained=_explain(gained, dropped_before, now.files[DATA], NOT_FOUND_BEFORE, examples),
        newly_quarantined=newly,
    )
