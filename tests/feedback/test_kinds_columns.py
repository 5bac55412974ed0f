"""Kinds group each corpus column by what it is, on the output of a real run with every stage of
the default recipe on, the quality stage in annotate mode and a fastText classifier.

The run (the bundled Common Crawl sample, `--executor local`) writes `quality_signals` (a struct of
the quality rules' values), `quality_tiny` (the classifier's probability), `quality_bucket` (0-19),
`pii_redacted`, `clean_removed_chars` and the rest. A bigram byte model trains on the kept rows
(the loss log as a training loop writes it) and `dataclean feedback --corpus` ranks their kinds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch")

from dataclean.cli import cli  # noqa: E402
from dataclean.feedback import LossLogWriter, StepLogWriter, per_sample_loss  # noqa: E402
from dataclean.feedback.analysis.groups import group_labels  # noqa: E402

from .byte_corpus import VOCAB, as_bytes  # noqa: E402

torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "dataclean" / "data" / "sample" / "web.jsonl"
MODEL = ROOT / "tests" / "fixtures" / "classify" / "tiny_hs_bigram.ftz"
FIFTHS = {"0-0.2", "0.2-0.4", "0.4-0.6", "0.6-0.8", "0.8-1"}


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("columns")
    settings = ["quality.mode=annotate", f"classify.models=tiny:{MODEL}", "classify.label=hq"]
    settings += ["classify.annotate=true"]
    command = ["run", str(SAMPLE), "-o", str(root / "out"), "--executor", "local", "--quiet"]
    result = CliRunner().invoke(cli, command + [a for s in settings for a in ("--set", s)])
    assert result.exit_code == 0, result.output
    table = pq.read_table(root / "out" / "data")
    ids, texts = table.column("id").to_pylist(), table.column("text").to_pylist()
    tokens = torch.tensor(as_bytes([t.ljust(80) for t in texts]))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(VOCAB, 32), torch.nn.Linear(32, VOCAB))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
    with LossLogWriter(root / "losses") as losses_log, StepLogWriter(root / "steps") as steps_log:
        for step in range(3 * len(ids) // 16):
            rows = [(step * 16 + k) % len(ids) for k in range(16)]
            losses = per_sample_loss(model(tokens[rows, :-1]), tokens[rows, 1:])
            optimizer.zero_grad()
            losses.mean().backward()
            optimizer.step()
            losses_log.log(step, [ids[r] for r in rows], losses)
            steps_log.log(step, losses.mean())
    command = ["feedback", "--losses", str(root / "losses"), "--steps", str(root / "steps")]
    command += ["--corpus", str(root / "out"), "-o", str(root / "feedback")]
    command += ["--group-by", "quality_signals.words", "--group-by", "clean_removed_chars"]
    result = CliRunner().invoke(cli, command)
    assert result.exit_code == 0, result.output
    return root


def test_each_column_is_grouped_by_what_it_is(run):
    table = pq.read_table(run / "out" / "data")
    names = set(table.column_names)
    assert {"quality_signals", "quality_tiny", "quality_bucket", "pii_redacted"} <= names
    probability = set(group_labels(table, "quality_tiny").to_pylist()) - {None}
    assert probability and probability <= FIFTHS  # a classifier's probability: fifths of [0, 1]
    buckets = set(group_labels(table, "quality_bucket").to_pylist()) - {None}
    assert buckets <= {str(b) for b in range(20)} and len(buckets) >= 5  # a bucket: its value
    assert group_labels(table, "quality_signals") is None  # a struct: not grouped as a whole
    words = [v for v in group_labels(table, "quality_signals.words").to_pylist() if v is not None]
    assert 3 <= len(set(words)) <= 5 and all("-" in v for v in words)  # a field: quintiles
    removed = set(group_labels(table, "clean_removed_chars").to_pylist()) - {None}
    assert removed and all(v.isdigit() or "-" in v for v in removed)  # a count: values or quintiles


def test_feedback_ranks_the_kinds_of_a_full_run(run):
    kinds = json.loads((run / "feedback" / "kinds.json").read_text())
    columns = {k["column"] for k in kinds}
    assert {"quality_bucket", "quality_signals.words"} <= columns, columns
    assert "quality_signals" not in columns
    tiny = {k["value"] for k in kinds if k["column"] == "quality_tiny"}
    assert tiny <= FIFTHS
    assert all(0 <= k["effect_low"] <= k["effect"] <= k["effect_high"] <= 1 for k in kinds)
