"""Run statistics: small, additive, one dict per (stage group, shard) task, merged by summing.

A task's stats hold, per stage, rows in/out, rows added (split), bytes in/out, seconds (wall) and
cpu_seconds (the CPU time of the thread that ran the stage's batches), drops by reason kind and,
where the stage counts something (`with_counts`; the reader's undecodable bytes), `counts`, plus
the shard's row accounting. `summarize` merges all tasks into `stats.json`,
whose totals show the accounting invariant (docs/contracts.md):
    rows_in + rows_added == kept + excluded + quarantined
per shard and in total. `copied` counts the kept rows also listed in a stage's destination
folder (the quarantine list's down-weighted rows, in OUT/quarantined/ with action `downweight`):
they are in `kept`, so the invariant does not count them again.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# The reader's count (stages[read].counts, and in totals): input bytes that were not UTF-8, removed.
UNDECODABLE = "undecodable_bytes"
# seconds: wall time of the stage's batches; cpu_seconds: the CPU time of the thread that ran them
# (a machine's load stretches the first, not the second).
STAGE_FIELDS = ("rows_in", "rows_out", "rows_added", "bytes_in", "bytes_out", "seconds", "cpu_seconds")
ACCOUNT_FIELDS = ("rows_in", "rows_added", "kept", "excluded", "quarantined", "copied")


def new_stage() -> dict[str, Any]:
    stats: dict[str, Any] = dict.fromkeys(STAGE_FIELDS, 0)
    stats["seconds"] = 0.0
    stats["cpu_seconds"] = 0.0
    stats["dropped"] = {}
    return stats


def new_account() -> dict[str, int]:
    return dict.fromkeys(ACCOUNT_FIELDS, 0)


def merge(into: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """Add `other` into `into`, recursively: numbers sum, dicts merge, keys keep first-seen order."""
    for key, value in other.items():
        if isinstance(value, dict):
            merge(into.setdefault(key, {}), value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            into[key] = into.get(key, 0) + value
        else:
            into.setdefault(key, value)
    return into


def invariant_holds(account: dict[str, int]) -> bool:
    """rows in + chunks added by splitting == kept + excluded + quarantined."""
    return account["rows_in"] + account["rows_added"] == (
        account["kept"] + account["excluded"] + account["quarantined"]
    )


def summarize(
    tasks: Iterable[dict[str, Any]],
    stage_order: list[str],
    wall_seconds: float,
    fit_seconds: dict[str, float] | None = None,
    fit_stats: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Merge task stats into the run's stats.json content.

    `fit_seconds`: driver time of each barrier's `fit` (its distributed reduce included), added
    to that stage's seconds and shown apart as `fit_seconds`. `fit_stats`: what each barrier's
    `fit` returned (`GlobalStage.fit`), kept whole as that stage's `fit`.
    """
    stages: dict[str, dict[str, Any]] = {}
    shards: dict[str, dict[str, int]] = {}
    for task in tasks:
        for name, stage in task.get("stages", {}).items():
            merge(stages.setdefault(name, new_stage()), stage)
        merge(shards.setdefault(task["shard"], new_account()), task["account"])
    for name, seconds in (fit_seconds or {}).items():
        stage = stages.setdefault(name, new_stage())
        stage["seconds"] += seconds
        stage["fit_seconds"] = round(seconds, 3)
    for name, returned in (fit_stats or {}).items():
        stages.setdefault(name, new_stage())["fit"] = returned
    totals = new_account()
    for account in shards.values():
        merge(totals, account)
    reasons: dict[str, int] = {}
    for stage in stages.values():
        merge(reasons, stage["dropped"])
    ordered = [{"stage": name, **stages[name]} for name in ["read", *stage_order] if name in stages]
    for shard in shards.values():
        shard["invariant_holds"] = invariant_holds(shard)
    return {
        "totals": {
            **totals,
            "invariant_holds": invariant_holds(totals) and all(s["invariant_holds"] for s in shards.values()),
            "bytes_in": stages.get("read", {}).get("bytes_out", 0),
            UNDECODABLE: stages.get("read", {}).get("counts", {}).get(UNDECODABLE, 0),
        },
        "stages": ordered,
        "reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])),
        "shards": shards,
        "seconds": {"wall": round(wall_seconds, 3)},
    }
