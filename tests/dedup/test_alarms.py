"""Dedup's alarms: the largest clusters and each source's share removed, in the fit's statistics,
stats.json, the report and the warning lines at the end of a run."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from click.testing import CliRunner

from dataclean import columns as C
from dataclean.cli import cli
from dataclean.stages.dedup import DropDuplicates
from tests.stages.test_dedup_stage import ENGLISH, run


def boilerplate_corpus() -> pa.Table:
    """Source "forum": 40 rows, 30 of them one boilerplate text in other case and spacing;
    source "books": 40 distinct paragraphs; 10 rows with no source."""
    rng = random.Random(4)
    ids: list[str] = []
    texts: list[str] = []
    sources: list[str | None] = []
    boilerplate = ENGLISH[0]
    for number in range(40):
        ids.append(f"forum{number:02d}")
        if number >= 30:
            texts.append(ENGLISH[11 + number])  # 41-50
        else:  # exact copies: other case or spacing
            texts.append(boilerplate.upper() if number % 2 else boilerplate + " ")
        sources.append("forum")
    for number in range(40):
        ids.append(f"books{number:02d}")
        texts.append(ENGLISH[1 + number])
        sources.append("books")
    for number in range(10):
        ids.append(f"loose{number:02d}")
        texts.append(ENGLISH[51 + number])
        sources.append(None)
    order = list(range(len(ids)))
    rng.shuffle(order)
    return pa.table(
        {
            C.ID: [ids[i] for i in order],
            C.TEXT: [texts[i] for i in order],
            C.SOURCE: [sources[i] for i in order],
        }
    )


def test_fit_reports_the_largest_clusters_and_each_sources_share(tmp_path: Path) -> None:
    table = boilerplate_corpus()
    texts = dict(zip(table.column(C.ID).to_pylist(), table.column(C.TEXT).to_pylist(), strict=True))
    copies = sorted(row for row, text in texts.items() if text.strip().lower() == ENGLISH[0].lower())
    stage = DropDuplicates(warn_cluster_size=10, warn_source_share=0.5)
    run(stage, table, tmp_path, shards=3, by_shard=True)
    largest = stage.fit_stats["largest_clusters"][0]
    assert largest["kept"] == copies[0]
    assert largest["size"] == len(copies)
    assert largest["exact"] == len(copies) - 1 and largest["near"] == 0
    assert largest["members"] == copies[1:6]  # dropped members, in keep order
    shares = {item["source"]: item for item in stage.fit_stats["source_shares"]}
    removed = len(copies) - 1
    assert shares["forum"] == {
        "source": "forum",
        "rows": 40,
        "removed": removed,
        "share": round(removed / 40, 4),
    }
    assert shares["books"]["removed"] == 0 and shares["books"]["rows"] == 40
    assert set(shares) == {"forum", "books"}  # rows without a source are not a source
    warnings = stage.fit_stats["warnings"]
    assert any(f"a cluster of {len(copies)} rows keeps only {copies[0]}" in line for line in warnings)
    assert any("source forum lost" in line for line in warnings)
    assert not any("books" in line for line in warnings)


def test_no_source_column_no_shares_and_quiet_under_the_limits(tmp_path: Path) -> None:
    table = boilerplate_corpus().drop_columns([C.SOURCE])
    stage = DropDuplicates()  # defaults: clusters of 1,000 rows, sources losing half
    run(stage, table, tmp_path)
    assert stage.fit_stats["source_shares"] is None
    assert stage.fit_stats["warnings"] == []


def test_warnings_end_the_run_and_reach_stats_and_report(tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    pq.write_table(boilerplate_corpus(), inputs / "part.parquet")
    out = tmp_path / "out"
    args = ["run", str(inputs), "-o", str(out), "--executor", "local", "--only", "dedup"]
    args += ["--set", "dedup.warn_cluster_size=10", "--set", "dedup.warn_source_share=0.5"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert any(line.startswith("warning: dedup: a cluster of 30 rows") for line in lines)
    assert any(line.startswith("warning: dedup: source forum lost") for line in lines)
    stats = json.loads((out / "stats.json").read_text())
    fit = next(stage["fit"] for stage in stats["stages"] if stage["stage"] == "dedup")
    assert fit["largest_clusters"][0]["size"] == 30
    page = (out / "report.html").read_text()
    assert "Removed per source" in page and "forum" in page
