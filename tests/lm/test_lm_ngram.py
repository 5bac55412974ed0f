"""The compiled n-gram scorer gives KenLM's own scores, bit for bit; models it does not take go to
KenLM itself."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from dataclean.lm import load_model, train_model
from dataclean.lm.arpa import read_arpa
from dataclean.lm.compiled import Tokenized
from dataclean.lm.model import LanguageModel
from tests.conftest import FIXTURE_ROOT
from tests.lm.test_lm_compiled import EDGE_CASES

FIXTURES = FIXTURE_ROOT / "lm"


def _texts(lang: str) -> list[str]:
    if lang == "en":
        lines = (FIXTURES / "wikitext2_test_en.txt").read_text().split("\n")
    else:
        lines = (FIXTURES / "cmrc2018_heldout_zh.txt").read_text().splitlines()
    # Rare Han characters: words of the zh model that are no piece of its tokenizer (unknowns).
    return [line for line in lines if line.strip()][:300] + EDGE_CASES + ["鸢 菠 诫 𫚭 谑 讧", "Ω ∰ ⨌"]


def _kenlm_scores(model: LanguageModel, tokenized: Tokenized) -> np.ndarray:
    return np.array([model.kenlm.score(line) for line in tokenized.lines], np.float64)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_scores_equal_kenlm_on_the_bundled_models(lang: str) -> None:
    model = load_model(lang)
    assert model.scorer is not None, "the bundled models are scored by the compiled scorer"
    tokenized = model.tokenize_array(pa.array(_texts(lang), pa.string()))
    assert (tokenized.ids < 0).any()  # the unknown-run path is exercised
    assert np.array_equal(model.query_tokenized(tokenized), _kenlm_scores(model, tokenized))


def test_lines_from_any_tokenizer_are_scored_by_their_text() -> None:
    model = load_model("zh")
    lines, owners = model.normalize(_texts("zh")[:50])
    tokenized = Tokenized.from_lines(model.tokenizer.tokenize_lines(lines), owners)
    assert (tokenized.ids < 0).all()
    assert np.array_equal(model.query_tokenized(tokenized), _kenlm_scores(model, tokenized))


@pytest.mark.parametrize("order", [2, 3, 5])
def test_a_model_trained_here_is_scored_as_kenlm_scores_it(tmp_path: Path, order: int) -> None:
    # Orders up to 4 go to the unrolled kernel, higher ones to the loop over orders.
    texts = (FIXTURES / "wikitext2_test_en.txt").read_text().splitlines()[:80]
    prune = (0, 1, 1, 1, 1)[:order]
    train_model(texts, tmp_path / "m", order=order, vocab_size=400, prune=prune, trainer="python")
    model = load_model(tmp_path / "m")
    assert model.scorer is not None
    tokenized = model.tokenize_array(pa.array([*texts, "zzzz qqqq", ""], pa.string()))
    assert np.array_equal(model.query_tokenized(tokenized), _kenlm_scores(model, tokenized))


ARPA = """\\data\\
ngram 1=5
ngram 2=3
ngram 3={trigrams}

\\1-grams:
-1.0\t<unk>\t0
0\t<s>\t-0.5
-0.7\t</s>\t0
-0.6\ta\t-0.2
-0.9\tb\t-0.3

\\2-grams:
-0.3\t<s> a\t-0.1
-0.4\ta b\t-0.15
-0.2\tb </s>\t0

\\3-grams:
-0.1\t<s> a b
{extra}
\\end\\
"""


def test_files_with_blanks_or_binary_files_are_left_to_kenlm(tmp_path: Path) -> None:
    good = tmp_path / "good.arpa.gz"
    good.write_bytes(gzip.compress(ARPA.format(trigrams=1, extra="").encode()))
    tables = read_arpa(good)
    assert tables is not None and tables.order == 3
    # A trigram whose suffix ("b a") is not a bigram: KenLM would insert a blank; not ours to copy.
    blank = tmp_path / "blank.arpa"
    blank.write_text(ARPA.format(trigrams=2, extra="-0.1\ta b a\n"))
    assert read_arpa(blank) is None
    assert read_arpa(tmp_path / "model.bin") is None


def test_a_model_without_tables_is_scored_by_kenlm_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("dataclean.lm.model.read_arpa", lambda path: None)
    model = load_model("en")
    assert model.scorer is None
    tokenized = model.tokenize_array(pa.array(_texts("en")[:20], pa.string()))
    assert np.array_equal(model.query_tokenized(tokenized), _kenlm_scores(model, tokenized))


def test_tables_come_back_from_the_cache_equal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "model.arpa"
    path.write_text(ARPA.format(trigrams=1, extra=""))
    built = read_arpa(path)
    assert list(tmp_path.rglob("*-arpa-v*.npz"))
    cached = read_arpa(path)
    assert built is not None and cached is not None
    for name in ("word_bytes", "word_offsets", "unigrams", "ngrams", "table_starts", "specials"):
        assert np.array_equal(getattr(built, name), getattr(cached, name)), name
