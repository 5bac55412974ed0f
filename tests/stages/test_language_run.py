"""`dataclean run` on real web text: languages as lid.176 labels them, perplexity within each.

The reference is fastText's own C++ predict (fasttext-predict) with lid.176 on each output row's
whole text, newlines as spaces: the way CCNet and datatrove label documents. dataclean reads the
first 2,000 characters of each document before splitting, so the comparison checks that wiring.
"""

from __future__ import annotations

import json
from pathlib import Path

import fasttext
import pytest
from click.testing import CliRunner

from dataclean import columns as C
from dataclean.cli import cli
from dataclean.lang import bundled_model_path
from dataclean.lm.train import train_model
from tests.conftest import FIXTURE_ROOT, SAMPLE, read_rows, sample_web_texts, write_jsonl

SAMPLE_WEB = SAMPLE / "web.jsonl"
UDHR = FIXTURE_ROOT / "lang" / "udhr_article1.tsv"


def _reference() -> fasttext.FastText._FastText:
    return fasttext.load_model(str(bundled_model_path()))


def _spanish_texts(reference: fasttext.FastText._FastText) -> list[str]:
    """Paragraphs of the sample's documents that lid.176 calls Spanish: a tiny model's corpus."""
    texts = []
    for text in sample_web_texts():
        for paragraph in text.split("\n"):
            (label,), _ = reference.predict(paragraph, k=1)
            if len(paragraph) > 60 and label == "__label__es":
                texts.append(paragraph)
    return texts


def test_run_on_web_text_labels_like_lid176_and_judges_perplexity_within_each_language(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reference = _reference()
    # A Spanish model trained by dataclean's own trainer, served from a file:// URI.
    spanish = _spanish_texts(reference)
    assert sum(map(len, spanish)) > 4000
    train_model(spanish, tmp_path / "es", order=3, vocab_size=400, trainer="python", metadata={"lang": "es"})
    monkeypatch.setenv("DATACLEAN_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli,
        [
            "run",
            str(SAMPLE_WEB),
            # the quality stage would drop most pages: this test judges the labels of all of them
            "--skip",
            "quality",
            "-o",
            str(out),
            "--executor",
            "local",
            "--set",
            f"perplexity.models=es:{(tmp_path / 'es').as_uri()}",
        ],
    )
    assert result.exit_code == 0, result.output
    assert list((tmp_path / "cache" / "models").iterdir())  # fetched into the cache
    kept = read_rows(out / "data")
    rows = kept + [row for row in read_rows(out / "excluded") if row.get(C.LANG) is not None]

    def label(text: str) -> tuple[str, float]:
        (found,), (probability,) = reference.predict(text.replace("\n", " "), k=1)
        return found.removeprefix("__label__"), float(probability)

    judged = [(row[C.LANG], label(row[C.TEXT])) for row in rows]
    confident = [(ours, theirs) for ours, (theirs, p) in judged if p >= 0.8]
    assert len(confident) >= 150
    agreement = sum(ours == theirs for ours, theirs in confident) / len(confident)
    assert agreement >= 0.9, agreement
    assert {lang for lang, _ in confident} >= {"en", "es", "fr"}

    # Perplexity is judged within each language: the English tail is English.
    tail = [row for row in kept if row[C.LANG] == "en" and row[C.PPL_BUCKET] == "tail"]
    assert len(tail) >= 30
    other = sum(label(row[C.TEXT])[0] != "en" for row in tail)
    assert other <= 0.15 * len(tail), (other, len(tail))

    # Only languages with a model get a ppl; Spanish has one now, from the URI.
    for row in kept:
        if row[C.LANG] not in ("en", "zh", "es"):
            assert row[C.PPL] is None and row[C.PPL_BUCKET] is None, row[C.ID]
    spanish_scored = [row for row in kept if row[C.LANG] == "es" and row[C.PPL] is not None]
    assert len(spanish_scored) >= 10
    assert {row[C.PPL_BUCKET] for row in spanish_scored} == {"head", "middle", "tail"}
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "Languages" in report and ">es<" in report


def test_language_filter_from_the_command_line(tmp_path: Path) -> None:
    rows = [
        {"id": code, "text": text}
        for code, text in (line.split("\t", 1) for line in UDHR.read_text(encoding="utf-8").splitlines())
    ]
    source = write_jsonl(tmp_path / "udhr.jsonl", rows)
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli,
        [
            *("run", str(source), "-o", str(out), "--executor", "local", "--only", "clean,language"),
            *("--set", "language.keep=zh,en", "--set", "language.min_score=0.5"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert sorted(row[C.ID] for row in read_rows(out / "data")) == ["en", "zh"]
    excluded = {row[C.ID]: row[C.REASON] for row in read_rows(out / "excluded")}
    assert excluded["de"] == "language:de" and excluded["ja"] == "language:ja"
    assert len(excluded) == len(rows) - 2
    stats = json.loads((out / "stats.json").read_text())
    assert stats["totals"]["invariant_holds"]


def test_a_model_uri_is_fetched_once_and_again_when_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclean.errors import ConfigError
    from dataclean.lm.fetch import fetch_model

    monkeypatch.setenv("DATACLEAN_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.json").write_text('{"lang": "xx"}')
    (folder / "tokenizer.model").write_bytes(b"first")
    first = fetch_model(folder.as_uri())
    assert (first / "tokenizer.model").read_bytes() == b"first"
    assert fetch_model(folder.as_uri()) == first
    (folder / "tokenizer.model").write_bytes(b"second, longer")
    second = fetch_model(folder.as_uri())
    assert second != first and (second / "tokenizer.model").read_bytes() == b"second, longer"
    with pytest.raises(ConfigError, match="not a folder"):
        fetch_model((tmp_path / "missing").as_uri())
