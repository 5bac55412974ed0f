"""`dataclean classify train`: a model trained on real text separates held-out positives from
negatives, measured by dataclean's own inference; the AUC matches scipy's Mann-Whitney U."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from click.testing import CliRunner

from dataclean.classify.models import label_probability
from dataclean.classify.train import held_out, read_texts, roc_auc
from dataclean.cli import cli
from dataclean.lang.fasttext import read_model

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
POSITIVE = FIXTURES / "lm" / "wikitext2_test_en.txt"  # WikiText-2 test paragraphs (Wikipedia)
NEGATIVE = (ROOT / "dataclean" / "data" / "sample" / "web.jsonl", FIXTURES / "lm" / "boilerplate_en.txt")


def _trainer() -> None:
    fasttext = pytest.importorskip("fasttext")
    if not hasattr(fasttext, "train_supervised"):
        pytest.skip("fastText's trainer is not installed (pip install fasttext-numpy2)")


def test_auc_equals_mann_whitney() -> None:
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(7)
    positive, negative = rng.normal(1, 1, 300).round(1), rng.normal(0, 1, 200).round(1)  # with ties
    expected = stats.mannwhitneyu(positive, negative).statistic / (len(positive) * len(negative))
    assert roc_auc(positive, negative) == pytest.approx(expected, abs=1e-12)


def test_held_out_share_is_stable_and_near_the_share() -> None:
    texts = [f"text number {i}" for i in range(5000)]
    aside = held_out(texts, 0.1)
    assert 0.08 < aside.mean() < 0.12
    assert np.array_equal(aside, held_out(list(reversed(texts)), 0.1)[::-1])


def test_trained_model_separates_held_out_real_text(tmp_path: Path) -> None:
    _trainer()
    model = tmp_path / "quality.bin"
    negatives = [arg for path in NEGATIVE for arg in ("--negative", str(path))]
    options = ["--heldout", "0.25", "--dim", "16", "--bucket", "100000", "--epoch", "10"]
    result = CliRunner().invoke(
        cli, ["classify", "train", str(POSITIVE), *negatives, "-o", str(model), *options]
    )
    assert result.exit_code == 0, result.output
    found = re.search(
        r"held out (\d+) positive and (\d+) negative texts: "
        r"precision ([\d.]+), recall ([\d.]+), AUC ([\d.]+)",
        result.output,
    )
    assert found, result.output
    positives, negatives_held, _precision, recall, auc = (float(v) for v in found.groups())
    assert positives >= 40 and negatives_held >= 40
    assert auc >= 0.85 and recall >= 0.8
    # The printed AUC is the trained file's, scored by the stage's inference on the held-out texts.
    texts = [*read_texts([str(POSITIVE)]), *read_texts([str(p) for p in NEGATIVE])]
    truth = np.arange(len(texts)) < len(list(read_texts([str(POSITIVE)])))
    aside = held_out(texts, 0.25)
    chosen = [text for text, kept_aside in zip(texts, aside, strict=True) if kept_aside]
    scores = label_probability(read_model(model), pa.array(chosen), "hq")
    assert roc_auc(scores[truth[aside]], scores[~truth[aside]]) == pytest.approx(auc, abs=5e-4)


def test_score_command_prints_probabilities() -> None:
    model = FIXTURES / "classify" / "tiny_hs_bigram.ftz"
    result = CliRunner().invoke(
        cli, ["classify", "score", "-m", str(model), "--label", "hq", "A short line."]
    )
    assert result.exit_code == 0, result.output
    assert '"probability"' in result.output


def test_training_without_negatives_is_a_one_line_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    result = CliRunner().invoke(
        cli, ["classify", "train", str(POSITIVE), "--negative", str(empty), "-o", str(tmp_path / "m.bin")]
    )
    assert result.exit_code != 0 and "needs positive and negative texts" in result.output
