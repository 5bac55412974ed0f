"""A synthetic run output with every column the report can show: ppl, buckets, chunks, duplicates.

Written the way the runner writes (data/, excluded/ and quarantined/ Parquet, stats.json,
manifest.json), with stats that agree with the files, so report tests need neither the
perplexity, split nor dedup stage. Excluded texts carry HTML and control characters on purpose.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HOSTILE = '<script>alert("x")</script> & <b>bold</b>\x07\x1b[0m'
LANGS = ("en", "zh")


def _kept_rows(rng: np.random.Generator) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for i in range(300):
        lang = LANGS[i % 2]
        doc = f"doc-{i:03d}"
        word = "word " if lang == "en" else "文字"
        length = int(rng.lognormal(9.0, 0.5)) if i % 10 == 0 else int(rng.lognormal(6.0, 1.0)) + 5
        pieces = 1 + length // 2000
        for k in range(pieces):
            rows.append(
                {
                    "id": f"{doc}#{k}" if pieces > 1 else doc,
                    "text": word * (length // len(word) // pieces + 1),
                    "parent_id": doc,
                    "lang": lang,
                    "ppl": float(rng.lognormal(5.5 if lang == "en" else 6.5, 0.5)),
                    "dup_cluster": doc if i < 3 else None,
                }
            )
    for lang in LANGS:
        mine = [row for row in rows if row["lang"] == lang]
        low, high = np.percentile([row["ppl"] for row in mine], [30, 60])
        for row in mine:
            row["ppl_bucket"] = "head" if row["ppl"] <= low else "middle" if row["ppl"] <= high else "tail"
    return rows


def _excluded_rows(rng: np.random.Generator) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for i in range(4):
        rows.append(
            {"id": f"bad-{i}", "text": HOSTILE * (i + 1), "stage": "clean", "reason": "clean:garbage"}
        )
    for i in range(5):
        rows.append(
            {"id": f"copy-{i}", "text": "word " * 50, "stage": "dedup", "reason": "dedup:exact_of:doc-000"}
        )
    for i in range(3):
        rows.append(
            {
                "id": f"near-{i}",
                "text": "word " * 48,
                "stage": "dedup",
                "reason": "dedup:near_duplicate_of:doc-001",
                "dup_jaccard": 0.75 + 0.05 * i,
            }
        )
    rows.append({"id": "copy-x", "text": "文字" * 30, "stage": "dedup", "reason": "dedup:exact_of:doc-002"})
    for i in range(6):
        lang = LANGS[i % 2]
        rows.append(
            {
                "id": f"odd-{i}",
                "text": "qx zv " * 20,
                "lang": lang,
                "stage": "perplexity_filter",
                "reason": "perplexity_filter:worst_fraction",
                "ppl": float(rng.uniform(5000, 9000)),
                "ppl_bucket": "tail",
            }
        )
    return rows


def _stats(
    kept: list[dict[str, Any]], excluded: list[dict[str, Any]], quarantined: list[dict[str, Any]]
) -> dict[str, Any]:
    chunks_added = len(kept) - len({row["parent_id"] for row in kept})
    rows_in = len(kept) - chunks_added + len(excluded) + len(quarantined)
    reasons: dict[str, int] = {}
    for row in excluded + quarantined:
        kind = ":".join(row["reason"].split(":", 2)[:2])
        reasons[kind] = reasons.get(kind, 0) + 1
    order = ("read", "clean", "dedup", "split", "perplexity", "perplexity_filter", "quarantine")
    stages, rows = [], rows_in
    for name in order:
        dropped = {k: n for k, n in reasons.items() if k.startswith(name + ":")}
        added = chunks_added if name == "split" else 0
        out = rows + added - sum(dropped.values())
        stages.append(
            {
                "stage": name,
                "rows_in": rows,
                "rows_out": out,
                "rows_added": added,
                "bytes_in": 0 if name == "read" else rows * 900,
                "bytes_out": out * 900,
                "seconds": 0.1,
                "dropped": dropped,
            }
        )
        rows = out
    totals = {
        "rows_in": rows_in,
        "rows_added": chunks_added,
        "kept": len(kept),
        "excluded": len(excluded),
        "quarantined": len(quarantined),
        "invariant_holds": True,
        "bytes_in": rows_in * 900,
    }
    return {
        "totals": totals,
        "stages": stages,
        "reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])),
        "shards": {"synthetic.parquet": {k: v for k, v in totals.items() if k != "bytes_in"}},
        "seconds": {"wall": 1.0},
    }


def make_synthetic_output(root: Path) -> dict[str, Any]:
    """Write the synthetic output under `root`; returns its stats."""
    rng = np.random.default_rng(7)
    kept, excluded = _kept_rows(rng), _excluded_rows(rng)
    quarantined = [
        {"id": "doc-299", "text": "loss spike text", "stage": "quarantine", "reason": "quarantine:loss_spike"}
    ]
    kept = [row for row in kept if row["id"] != "doc-299"]
    for folder, rows, name in (
        ("data", kept[:150], "part-00000-000"),
        ("data", kept[150:], "part-00001-000"),
        ("excluded", excluded, "part-00000-clean-000"),
        ("quarantined", quarantined, "part-00000-quarantine-000"),
    ):
        (root / folder).mkdir(parents=True, exist_ok=True)
        columns = list(dict.fromkeys(key for row in rows for key in row))
        rows = [{key: row.get(key) for key in columns} for row in rows]
        pq.write_table(pa.Table.from_pylist(rows), root / folder / f"{name}.parquet", row_group_size=64)
    stats = _stats(kept, excluded, quarantined)
    manifest = {
        "dataclean_version": "test",
        "config": {
            "pipeline": "synthetic",
            "stages": [
                {"stage": "dedup", "params": {"threshold": 0.7}},
                {"stage": "split", "params": {"max_chars": 2000}},
                {"stage": "perplexity_filter", "params": {"max_ppl": ["zh=20000"], "drop_fraction": 0.02}},
            ],
        },
        "config_hash": "synthetic",
        # What the stages declared (`dataclean.run.config.declared`): the report finds its sections by it.
        "declared": [
            {"stage": "dedup", "provides": ["dup_cluster", "dup_jaccard"], "adds_rows": False},
            {"stage": "split", "provides": [], "adds_rows": True},
            {"stage": "perplexity_filter", "provides": ["ppl_bucket"], "adds_rows": False},
        ],
        "inputs": [{"uri": "synthetic.parquet", "name": "synthetic.parquet", "size": 1000, "mtime": 0}],
        "complete": True,
    }
    (root / "stats.json").write_text(json.dumps(stats))
    (root / "manifest.json").write_text(json.dumps(manifest))
    return stats
