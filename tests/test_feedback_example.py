"""The example's trainer writes logs that `dataclean feedback` reads (a few steps; needs torch)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("torch")

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "feedback_loop"
FIXTURE = Path(__file__).parent / "fixtures" / "feedback" / "paragraphs.jsonl"


def test_training_logs_feed_the_feedback_command(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLE))
    import train

    curve = train.train(FIXTURE, tmp_path / "logs", FIXTURE, epochs=2, batch_size=8, seq_len=32)
    assert len(curve["loss"]) == 10 and curve["heldout"]
    from dataclean.feedback.cli import feedback

    result = CliRunner().invoke(
        feedback,
        [
            "--losses",
            str(tmp_path / "logs" / "losses"),
            "--steps",
            str(tmp_path / "logs" / "steps"),
            "-o",
            str(tmp_path / "fb"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "80 loss rows" in result.output
    assert isinstance(json.loads((tmp_path / "fb" / "spikes.json").read_text()), list)
    sys.modules.pop("train", None)
