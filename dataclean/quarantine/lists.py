"""The quarantine list: which samples the next run leaves out (or down-weights), and why.

Schema in `dataclean.quarantine.schema.QUARANTINE_SCHEMA` (docs/contracts.md, "Quarantine list"). Lists
merge without duplicates, keyed by `sample_id`: an entry seen in several lists keeps its first
reason, text hash, text and timestamp, the widest step range, the most occurrences, the highest
score, the strictest action (`drop` over `downweight` over `review`) and the lowest weight, and the union of
sources. So merging is idempotent: `merge(merge(a, b), b) == merge(a, b)`.
"""

from __future__ import annotations

import fcntl
import math
import os
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dataclean import columns as C
from dataclean.errors import InputError
from dataclean.quarantine.schema import QUARANTINE_ACTIONS, QUARANTINE_SCHEMA

_REQUIRED = (C.SAMPLE_ID,)


def empty_list() -> pa.Table:
    """A quarantine list with no entries."""
    return QUARANTINE_SCHEMA.empty_table()


def make_list(entries: Iterable[dict[str, Any]]) -> pa.Table:
    """A list from entry dicts; missing fields get defaults (drop, weight 0, added now)."""
    now = datetime.now(timezone.utc).replace(microsecond=0)
    rows = []
    for entry in entries:
        row = {name: entry.get(name) for name in QUARANTINE_SCHEMA.names}
        row[C.SAMPLE_ID] = str(row[C.SAMPLE_ID])
        row[C.ACTION] = row[C.ACTION] or "drop"
        if row[C.ACTION] not in QUARANTINE_ACTIONS:
            raise ValueError(f"action {row[C.ACTION]!r} is not one of {', '.join(QUARANTINE_ACTIONS)}")
        if row[C.WEIGHT] is None:
            row[C.WEIGHT] = 0.0 if row[C.ACTION] == "drop" else 0.1
        row[C.ADDED_AT] = row[C.ADDED_AT] or now
        rows.append(row)
    return merge_lists(pa.Table.from_pylist(rows, schema=QUARANTINE_SCHEMA))


def read_list(path: str | os.PathLike[str]) -> pa.Table:
    """Read a quarantine list (Parquet) into the schema; optional columns may be absent."""
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as error:
        raise InputError(str(path), f"cannot read the quarantine list: {error}") from None
    missing = [name for name in _REQUIRED if name not in table.column_names]
    if missing:
        raise InputError(str(path), f"not a quarantine list: no column {missing[0]!r}")
    arrays = []
    for field in QUARANTINE_SCHEMA:
        if field.name not in table.column_names:
            arrays.append(pa.nulls(table.num_rows, field.type))
            continue
        column = table.column(field.name)
        if field.name == C.ADDED_AT and pa.types.is_string(column.type):
            column = pa.array(
                [None if v is None else datetime.fromisoformat(v) for v in column.to_pylist()],
                type=field.type,
            )
        try:
            arrays.append(column.cast(field.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise InputError(str(path), f"column {field.name!r} is not {field.type}") from None
    table = pa.Table.from_arrays(arrays, schema=QUARANTINE_SCHEMA)
    return merge_lists(table)


def write_list(table: pa.Table, path: str | os.PathLike[str]) -> None:
    """Write a list atomically (temp name in the same folder, then rename)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.tmp")
    pq.write_table(table.cast(QUARANTINE_SCHEMA), temp)
    os.replace(temp, target)


def _union(first: str | None, second: str | None) -> str | None:
    parts = [p for p in (first or "").split(",") + (second or "").split(",") if p]
    return ",".join(dict.fromkeys(parts)) or None


def _max(first: float | None, second: float | None) -> float | None:
    values = [v for v in (first, second) if v is not None and not math.isnan(v)]
    return max(values) if values else first if first is not None else second


def _min(first: Any, second: Any) -> Any:
    values = [v for v in (first, second) if v is not None]
    return min(values) if values else None


_STRICTNESS = ("drop", "downweight", "review", None)  # the strictest action of an entry wins


def applied(table: pa.Table) -> pa.Table:
    """The entries a run applies: all but those with action `review` (listed for a person by
    `dataclean feedback`, applied once accepted with `dataclean feedback accept`)."""
    return table.filter(pc.invert(pc.fill_null(pc.equal(table.column(C.ACTION), "review"), False)))


def _combine(kept: dict[str, Any], new: dict[str, Any]) -> None:
    for name in (C.TEXT_HASH, C.REASON, C.TEXT):
        kept[name] = kept[name] if kept[name] is not None else new[name]
    kept[C.SCORE] = _max(kept[C.SCORE], new[C.SCORE])
    kept[C.FIRST_STEP] = _min(kept[C.FIRST_STEP], new[C.FIRST_STEP])
    last = [v for v in (kept[C.LAST_STEP], new[C.LAST_STEP]) if v is not None]
    kept[C.LAST_STEP] = max(last) if last else None
    occurrences = [v for v in (kept[C.OCCURRENCES], new[C.OCCURRENCES]) if v is not None]
    kept[C.OCCURRENCES] = max(occurrences) if occurrences else None
    kept[C.ACTION] = min(kept[C.ACTION], new[C.ACTION], key=_STRICTNESS.index)
    kept[C.WEIGHT] = _min(kept[C.WEIGHT], new[C.WEIGHT])
    kept[C.SOURCE] = _union(kept[C.SOURCE], new[C.SOURCE])
    kept[C.ADDED_AT] = _min(kept[C.ADDED_AT], new[C.ADDED_AT])


def merge_lists(*tables: pa.Table) -> pa.Table:
    """Merge lists into one without duplicate sample ids (see the module docstring for how)."""
    merged: dict[str, dict[str, Any]] = {}
    for table in tables:
        for row in table.cast(QUARANTINE_SCHEMA).to_pylist():
            key = row[C.SAMPLE_ID]
            if key is None:
                continue
            if key in merged:
                _combine(merged[key], row)
            else:
                merged[key] = row
    return pa.Table.from_pylist(list(merged.values()), schema=QUARANTINE_SCHEMA)


def merge_into(path: str | os.PathLike[str], entries: pa.Table) -> pa.Table:
    """Merge `entries` into the list file at `path` (created if missing) and return the merged
    list. Writers sharing one list (ranks, the guard and `dataclean supervise`) take a lock file
    beside it, so they merge one after another and no entry is lost."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    lock = target.with_name(f".{target.name}.lock")
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            existing = read_list(target) if target.exists() else empty_list()
            merged = merge_lists(existing, entries)
            write_list(merged, target)
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
    return merged
