"""The run report's data: funnel = stats.json, escaped excerpts, sections, perplexity, lengths, clusters."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from dataclean import columns as C
from dataclean.cli import cli
from dataclean.executors.local import LocalExecutor
from dataclean.report.collect import build_report
from dataclean.report.page import render
from dataclean.report.scan import load_output
from dataclean.run import run_pipeline
from dataclean.stages.clean import CleanText
from tests.conftest import SAMPLE, read_rows
from tests.report.report_synthetic import HOSTILE, make_synthetic_output


class Tables(HTMLParser):
    """The text of every table cell of a page: [[header cells], [row cells], ...] per table."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _tables(page: str) -> list[list[list[str]]]:
    parser = Tables()
    parser.feed(page)
    return parser.tables


@pytest.fixture(scope="module")
def sample_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "sample"
    run_pipeline([str(SAMPLE)], str(out), [CleanText()], LocalExecutor())
    return out


@pytest.fixture(scope="module")
def synthetic_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "synthetic"
    make_synthetic_output(out)
    return out


def test_every_run_writes_a_report_whose_funnel_equals_stats_json(sample_out: Path) -> None:
    page = (sample_out / "report.html").read_text()
    stats = json.loads((sample_out / "stats.json").read_text())
    funnel = next(t for t in _tables(page) if t[0][:3] == ["stage", "rows in", "rows out"])
    assert [row[0] for row in funnel[1:]] == [s["stage"] for s in stats["stages"]]
    for row, stage in zip(funnel[1:], stats["stages"], strict=True):
        assert [int(cell.replace(",", "")) for cell in row[1:5]] == [
            stage["rows_in"],
            stage["rows_out"],
            stage["rows_added"],
            sum(stage["dropped"].values()),
        ]
        assert float(row[6]) == pytest.approx(stage["bytes_out"] / 1e6, abs=0.005)
    reasons = next(t for t in _tables(page) if t[0][:2] == ["reason", "rows"])
    assert {row[0]: int(row[1]) for row in reasons[1:]} == stats["reasons"]
    assert page.count("<script") == 1 + page.count("Plotly.newPlot(")  # plotly.js embedded once
    assert "cdn" not in page.split("</head>")[1].lower()


def test_excerpts_are_escaped_and_show_invisible_characters(synthetic_out: Path) -> None:
    page = render(build_report(str(synthetic_out)))
    assert '<script>alert("x")' not in page and "<b>bold</b>" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;" in page
    assert '<span class="ctl">U+0007</span><span class="ctl">U+001B</span>' in page
    assert "\x07" not in page and "\x1b" not in page
    assert HOSTILE.startswith("<script>")


def test_excerpts_are_a_stable_id_hash_sample_of_each_reason(synthetic_out: Path) -> None:
    first = build_report(str(synthetic_out)).excerpts
    again = build_report(str(synthetic_out)).excerpts
    assert first == again
    assert set(first) == set(load_output(str(synthetic_out)).stats["reasons"])
    for kind, excerpts in first.items():
        assert 1 <= len(excerpts) <= 3
        assert all(e.reason == kind or e.reason.startswith(kind + ":") for e in excerpts)
    [spike] = first["quarantine:loss_spike"]
    assert (spike.id, spike.text, spike.length) == ("doc-299", "loss spike text", 15)


def test_sections_appear_only_when_their_columns_exist(sample_out: Path, synthetic_out: Path) -> None:
    sample = (sample_out / "report.html").read_text()
    synthetic = render(build_report(str(synthetic_out)))
    for anchor in ("perplexity", "lengths", "duplicates"):
        assert f'<section id="{anchor}">' not in sample
        assert f'<section id="{anchor}">' in synthetic
    assert '<section id="compare">' not in synthetic


def test_perplexity_histograms_buckets_and_thresholds(synthetic_out: Path) -> None:
    report = build_report(str(synthetic_out))
    assert report.perplexity is not None and list(report.perplexity) == ["en", "zh"]
    kept = read_rows(synthetic_out / "data")
    dropped = [row for row in read_rows(synthetic_out / "excluded") if row.get(C.PPL) is not None]
    for lang, entry in report.perplexity.items():
        for bucket in ("head", "middle", "tail"):
            mine = [r[C.PPL] for r in kept if r[C.LANG] == lang and r[C.PPL_BUCKET] == bucket]
            assert entry.kept[bucket].total == len(mine)
            if bucket != "tail":
                assert entry.bucket_max[bucket] == max(mine)
        worst = [r[C.PPL] for r in dropped if r[C.LANG] == lang]
        assert entry.dropped["perplexity_filter:worst_fraction"].total == len(worst)
        assert entry.dropped_min["perplexity_filter:worst_fraction"] == min(worst)
        labels = dict(entry.cut_points())
        assert labels["head | middle"] == entry.bucket_max["head"]
        assert labels.get("max_ppl (set)") == (20000.0 if lang == "zh" else None)


def test_lengths_before_and_after_splitting(synthetic_out: Path) -> None:
    lengths = build_report(str(synthetic_out)).lengths
    kept = read_rows(synthetic_out / "data")
    chunks = [r for r in kept if r[C.ID] != r[C.PARENT_ID]]
    assert lengths is not None and lengths.chunks == len(chunks)
    assert lengths.split_documents == len({r[C.PARENT_ID] for r in chunks})
    assert lengths.samples.total == len(kept) == lengths.rows_read == lengths.rows_total
    assert lengths.documents.total == len({r[C.PARENT_ID] for r in kept})
    assert lengths.budget == 2000.0
    output = load_output(str(synthetic_out))
    from dataclean.report.lengths import length_summary

    sampled = length_summary(output, max_rows=100)
    assert sampled is not None and sampled.rows_read < sampled.rows_total == len(kept)


def test_duplicate_clusters_from_reasons(synthetic_out: Path) -> None:
    clusters = build_report(str(synthetic_out)).clusters
    assert clusters is not None
    assert clusters.sizes == {2: 1, 4: 1, 6: 1}
    assert (clusters.exact, clusters.near, clusters.clusters) == (6, 3, 3)
    assert [(c.kept_id, c.size, c.exact, c.near) for c in clusters.largest] == [
        ("doc-000", 6, 5, 0),
        ("doc-001", 4, 0, 3),
        ("doc-002", 2, 1, 0),
    ]
    assert clusters.jaccard.total == 3 and clusters.threshold == 0.7
    assert clusters.kept_with_cluster == sum(1 for r in read_rows(synthetic_out / "data") if r[C.DUP_CLUSTER])


def test_cluster_sizes_from_the_fit_equal_the_exclusion_logs(tmp_path: Path) -> None:
    """A run's dedup fit counts its clusters' sizes (no table of every kept id on the driver);
    the report takes them from there, and they are what counting the exclusion log gives."""
    from dataclean.report.clusters import _fit_sizes, cluster_summary
    from dataclean.stages.dedup import DropDuplicates
    from tests.stages.test_dedup_stage import corpus

    source = tmp_path / "in.parquet"
    pq.write_table(corpus(), source)
    run_pipeline([str(source)], str(tmp_path / "out"), [DropDuplicates()], LocalExecutor())
    output = load_output(str(tmp_path / "out"))
    fit = output.stage_stats("dedup")["fit"]
    assert _fit_sizes(output, fit, 10) is not None
    from_fit = cluster_summary(output)
    del fit["cluster_sizes"]
    for stage in output.stats["stages"]:
        stage.get("fit", {}).pop("cluster_sizes", None)
    from_log = cluster_summary(output)
    assert from_fit is not None and from_log is not None and from_log.exact + from_log.near > 10
    assert (from_fit.sizes, from_fit.exact, from_fit.near) == (from_log.sizes, from_log.exact, from_log.near)
    assert [(c.kept_id, c.exact, c.near) for c in from_fit.largest] == [
        (c.kept_id, c.exact, c.near) for c in from_log.largest
    ]


def test_a_report_failure_does_not_fail_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import dataclean.report

    def broken(out_dir: str, compare_to: str | None = None) -> str:
        raise RuntimeError("no charts today")

    monkeypatch.setattr(dataclean.report, "write_report", broken)
    source = tmp_path / "in.jsonl"
    source.write_text('{"text": "fine"}\n')
    with caplog.at_level(logging.WARNING):
        stats = run_pipeline([str(source)], str(tmp_path / "out"), [CleanText()], LocalExecutor())
    assert stats["totals"]["kept"] == 1 and (tmp_path / "out" / "stats.json").exists()
    assert not (tmp_path / "out" / "report.html").exists()
    assert "report.html not written" in caplog.text and "no charts today" in caplog.text


def test_report_command(sample_out: Path, synthetic_out: Path, tmp_path: Path) -> None:
    (sample_out / "report.html").unlink()
    result = CliRunner().invoke(cli, ["report", str(sample_out), "--compare", str(synthetic_out)])
    assert result.exit_code == 0, result.output
    assert (sample_out / "report.html").exists() and '<section id="compare">' in (
        sample_out / "report.html"
    ).read_text()
    result = CliRunner().invoke(cli, ["report", str(tmp_path)])
    assert result.exit_code == 2 and "no stats.json" in result.output and "Traceback" not in result.output
    assert pq.read_schema(next((sample_out / "data").glob("*.parquet")))  # outputs untouched


def test_prepare_loads_the_reports_code_ahead() -> None:
    # The CLI prepares the report while Ray starts: in a fresh process, prepare() leaves plotly's
    # figure machinery (its validators, loaded on a figure's first use) loaded, so the report at
    # the end of the run does not wait for it.
    script = (
        "import sys\n"
        "from dataclean.report import prepare\n"
        "assert '_plotly_utils.basevalidators' not in sys.modules\n"
        "prepare()\n"
        "assert '_plotly_utils.basevalidators' in sys.modules\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]
