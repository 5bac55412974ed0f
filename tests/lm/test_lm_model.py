"""Bundled models, the CCNet perplexity formula, the short-text rule, training and the lm CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from dataclean.errors import ConfigError
from dataclean.lm import DEFAULT_MIN_TOKENS, load_model, normalize_lines, train_model
from dataclean.lm.cli import lm
from tests.conftest import FIXTURE_ROOT

FIXTURES = FIXTURE_ROOT / "lm"
EN = "The committee published its annual report on the state of the river in the spring."
ZH = "长江是中国第一长河，全长约六千三百公里，流经青海、西藏、四川、云南等省区。"


@pytest.fixture(scope="module")
def en() -> object:
    return load_model("en")


def test_bundled_models_load_and_say_what_they_are() -> None:
    for lang in ("en", "zh"):
        model = load_model(lang)
        assert model.lang == lang
        assert model.metadata["order"] >= 3 and "training_data" in model.metadata


def test_perplexity_is_the_ccnet_formula(en: object) -> None:
    text = EN + "\nA second line, scored on its own."
    lines = normalize_lines(text)
    tokenized = en.tokenizer.tokenize_lines(lines)  # type: ignore[attr-defined]
    log10 = sum(en.kenlm.score(line) for line in tokenized)  # type: ignore[attr-defined]
    tokens = sum(len(line.split()) + 1 for line in tokenized)
    assert en.perplexity(text) == pytest.approx(10 ** (-log10 / tokens))  # type: ignore[attr-defined]


def _reference_perplexity(model: object, text: str, min_tokens: int = DEFAULT_MIN_TOKENS) -> float:
    """CCNet's perplexity of one text through the libraries themselves, line by line: the Python
    normalization, SentencePiece's own encode (not the compiled search) and KenLM's own
    `Model.score` per sentence."""
    lines = normalize_lines(text)
    pieces = model.tokenizer.tokenize_lines(lines)  # type: ignore[attr-defined]
    log10 = sum(model.kenlm.score(line) for line in pieces)  # type: ignore[attr-defined]
    tokens = sum(len(line.split()) + 1 for line in pieces)
    if tokens == 0 or tokens - len(pieces) < min_tokens:
        return math.nan
    return float(10 ** (-log10 / tokens))


def test_the_compiled_batch_scorer_equals_sentencepiece_and_kenlm_text_by_text() -> None:
    # Two different paths: the batch scorer (compiled normalization and search, word cache shared
    # across the batch) against SentencePiece and KenLM called per text and per sentence.
    paragraphs = [p for p in (FIXTURES / "wikitext2_test_en.txt").read_text().split("\n") if p.strip()]
    chinese = (FIXTURES / "cmrc2018_heldout_zh.txt").read_text().splitlines()[:40]
    for lang, corpus in (("en", paragraphs[:120]), ("zh", chinese)):
        model = load_model(lang)
        texts = [*corpus, EN, EN.upper(), "Ça coûte 1234 euros, dit-il.", "", EN + "\n\n\n", ZH, "Hi."]
        batch = model.perplexities(texts)
        reference = np.array([_reference_perplexity(model, text) for text in texts])
        assert np.array_equal(np.isnan(batch), np.isnan(reference))
        assert np.allclose(batch, reference, rtol=1e-9, equal_nan=True), lang
    en = load_model("en")
    batch = en.perplexities([EN, EN.upper(), "", EN + "\n\n\n"])
    assert batch[0] == pytest.approx(batch[1]) == pytest.approx(batch[3])  # case, blank lines
    assert math.isnan(batch[2])


def test_short_texts_are_not_scored(en: object) -> None:
    assert math.isnan(en.perplexity("Hello there."))  # type: ignore[attr-defined]
    assert not math.isnan(en.perplexity("Hello there.", min_tokens=1))  # type: ignore[attr-defined]
    assert DEFAULT_MIN_TOKENS > 1


def test_clean_text_scores_lower_than_damaged_text() -> None:
    en, zh = load_model("en"), load_model("zh")
    assert en.perplexity(EN) < en.perplexity(" ".join(reversed(EN.split())))
    assert zh.perplexity(ZH) < zh.perplexity(ZH[::-1])
    # A model scores its own language far better than the other one.
    assert zh.perplexity(ZH) < en.perplexity(ZH)


def test_tokenizer_pieces_start_words_with_the_space_symbol(en: object) -> None:
    pieces = en.tokenizer.tokenize_lines(["hello world"])[0].split()  # type: ignore[attr-defined]
    assert pieces[0].startswith("▁") and "".join(pieces).replace("▁", " ").strip() == "hello world"


def test_unknown_model_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a bundled model"):
        load_model("fr")
    with pytest.raises(ConfigError, match=r"tokenizer\.model"):
        load_model(tmp_path)


def test_train_model_writes_a_folder_that_loads(tmp_path: Path) -> None:
    texts = (FIXTURES / "wikitext2_test_en.txt").read_text().splitlines()[:80]
    info = train_model(
        texts, tmp_path / "m", order=3, vocab_size=500, trainer="python", metadata={"lang": "en"}
    )
    assert info["trainer"] == "python" and info["ngrams"][0] > 400
    model = load_model(tmp_path / "m")
    assert model.lang == "en" and model.metadata["vocab_size"] == 500
    assert model.perplexity(texts[0]) < model.perplexity(" ".join(reversed(texts[0].split())))


def test_lm_cli_train_and_score(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join((FIXTURES / "wikitext2_test_en.txt").read_text().splitlines()[:60]))
    runner = CliRunner()
    result = runner.invoke(
        lm,
        [
            "train",
            str(corpus),
            "-o",
            str(tmp_path / "m"),
            "--order",
            "3",
            "--vocab-size",
            "400",
            "--prune",
            "0 0 1",
            "--trainer",
            "python",
        ],
    )
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "m" / "model.json").read_text())["prune"] == [0, 0, 1]
    result = runner.invoke(lm, ["score", "-m", str(tmp_path / "m"), EN, "hi"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert rows[0]["ppl"] > 1 and rows[1]["ppl"] is None


def test_lm_cli_errors_are_one_line(tmp_path: Path) -> None:
    from dataclean.cli import cli

    result = CliRunner().invoke(
        cli, ["lm", "train", str(tmp_path / "missing.txt"), "-o", str(tmp_path / "m"), "--trainer", "python"]
    )
    assert result.exit_code == 2 and "no such corpus file" in result.output


def test_tokenize_gives_the_whole_line_sentencepiece_pieces(en: object) -> None:
    """`tokenize` (the compiled path, see test_lm_compiled.py) = normalize_lines + SentencePiece."""
    texts = (FIXTURES / "wikitext2_test_en.txt").read_text(encoding="utf-8").splitlines()[:60]
    texts += ["Tabs\tand\x0bcontrols glue words", "Ünïcödé 12 words", EN + "\n  \n" + EN.upper()]
    tokenized, owners = en.tokenize(texts)  # type: ignore[attr-defined]
    expected, expected_owners = [], []
    for index, text in enumerate(texts):
        lines = normalize_lines(text)
        expected += en.tokenizer.tokenize_lines(lines)  # type: ignore[attr-defined]
        expected_owners += [index] * len(lines)
    got = sorted(zip(owners.tolist(), tokenized, strict=True))
    assert got == sorted(zip(expected_owners, expected, strict=True))
