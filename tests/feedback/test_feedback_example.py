"""The example's training loop feeds `dataclean feedback`, and the whole example meets its target:
from nothing but this repository, with default settings, its quarantine list has precision and
recall >= 0.9 against the injected samples (its answer key, written before any detector runs),
and the data spike it injects into training is diagnosed `data` with exactly the corrupt
records, after the run and, by the training guard, while it trains. Needs torch (the `torch`
extra); a few CPU minutes."""

from __future__ import annotations

import json
import sys

import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest
from click.testing import CliRunner

from tests.conftest import FIXTURE_ROOT, ROOT

pytest.importorskip("torch")

EXAMPLE = ROOT / "examples" / "feedback_loop"
FIXTURE = FIXTURE_ROOT / "feedback" / "paragraphs.jsonl"


@pytest.fixture
def example(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLE))
    import corpus
    import run
    import train

    yield run, train, corpus
    for name in ("run", "train", "corpus"):
        sys.modules.pop(name, None)


def test_training_logs_feed_the_feedback_command(tmp_path, example):
    _, train, corpus = example
    records = corpus.spike_records(2)
    curve = train.train(
        FIXTURE, tmp_path / "logs", FIXTURE, epochs=2, batch_size=8, seq_len=32, inject={7: records}
    )
    assert len(curve["loss"]) == 10 and curve["heldout"]
    losses = ds.dataset(tmp_path / "logs" / "losses", format="parquet").to_table()
    at_spike = losses.filter(pc.equal(losses.column("step"), 7)).column("sample_id").to_pylist()
    assert len(at_spike) == 10 and at_spike[-2:] == ["corrupt-0", "corrupt-1"]
    from dataclean.feedback.analysis.cli import feedback

    result = CliRunner().invoke(
        feedback,
        [
            *("--losses", str(tmp_path / "logs" / "losses")),
            *("--steps", str(tmp_path / "logs" / "steps")),
            *("-o", str(tmp_path / "fb")),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "82 loss rows" in result.output
    assert isinstance(json.loads((tmp_path / "fb" / "spikes.json").read_text()), list)


def test_the_example_meets_its_target_with_default_settings(tmp_path, example):
    run, _, _ = example
    figures = run.first_pass(tmp_path / "work")
    assert figures["spike"] == 1.0
    assert figures["guard"] == 1.0  # the training guard caught it live, with the same samples
    assert figures["precision"] >= 0.9 and figures["recall"] >= 0.9, figures
