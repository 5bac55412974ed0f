"""The numpy modified Kneser-Ney trainer: textbook properties, a hand-computed model, lmplz parity."""

from __future__ import annotations

import math
import random
import shutil
import subprocess
from pathlib import Path

import kenlm
import pytest

from dataclean.lm.kneser_ney import train_arpa
from tests.conftest import FIXTURE_ROOT

FIXTURES = FIXTURE_ROOT / "lm"
TINY = ["a b", "a b a", "b a c"]

Arpa = dict[tuple[str, ...], tuple[float, float]]


def read_arpa(path: Path) -> Arpa:
    """{n-gram: (log10 p, log10 backoff)} of a plain ARPA file."""
    ngrams: Arpa = {}
    in_section = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("\\") and line.endswith("-grams:"):
            in_section = True
        elif line.startswith("\\"):
            in_section = False
        elif in_section and line:
            fields = line.split("\t")
            backoff = float(fields[2]) if len(fields) > 2 else 0.0
            ngrams[tuple(fields[1].split(" "))] = (float(fields[0]), backoff)
    return ngrams


def arpa_log10(model: Arpa, context: tuple[str, ...], word: str) -> float:
    """log10 p(word | context) by ARPA backoff rules."""
    if (*context, word) in model:
        return model[(*context, word)][0]
    if not context:
        return model[("<unk>",)][0]
    backoff = model[context][1] if context in model else 0.0
    return backoff + arpa_log10(model, context[1:], word)


def corpus() -> list[str]:
    """A real, tokenized corpus of ~60k words: held-out Wikipedia paragraphs, lowercased."""
    text = (FIXTURES / "wikitext2_test_en.txt").read_text(encoding="utf-8").lower()
    return [" ".join(line.split()) for line in text.splitlines()[:120]]


def test_tiny_corpus_matches_hand_computation(tmp_path: Path) -> None:
    train_arpa(TINY, tmp_path / "tiny.arpa", order=3)
    model = read_arpa(tmp_path / "tiny.arpa")
    # Unigram adjusted counts = distinct left neighbours: a 2, b 2, c 1, </s> 3 (sum 8). Counts
    # of those counts n1..n4 = 1, 2, 1, 0, so Y = 1/(1+2*2) = 0.2, D1 = 1 - 2Y*2/1 = 0.2,
    # D2 = 2 - 3Y*1/2 = 1.7, D3+ = 3 - 4Y*0/1 = 3. gamma = (0.2 + 2*1.7 + 3)/8 = 0.825, spread
    # uniformly over the 5 words other than <s> (0.165 each).
    expected_unigrams = {
        "a": (2 - 1.7) / 8 + 0.165,
        "b": (2 - 1.7) / 8 + 0.165,
        "c": (1 - 0.2) / 8 + 0.165,
        "</s>": (3 - 3.0) / 8 + 0.165,
        "<unk>": 0.165,
    }
    for word, p in expected_unigrams.items():
        assert model[(word,)][0] == pytest.approx(math.log10(p), abs=1e-5)
    assert model[("<s>",)][0] == 0.0  # lmplz's convention: <s> is never predicted
    # Bigram counts of counts n3 = 0: discounts fall back to 0.5, 1, 1.5. Context "a" is followed
    # by b, </s>, c (adjusted count 1 each): p(b|a) = 0.5/3 + (1.5/3) p(b); backoff(a) = 0.5.
    p_b = expected_unigrams["b"]
    p_b_given_a = 0.5 / 3 + 0.5 * p_b
    assert model[("a", "b")][0] == pytest.approx(math.log10(p_b_given_a), abs=1e-5)
    assert model[("a",)][1] == pytest.approx(math.log10(0.5), abs=1e-5)
    # "<s> a" is followed only by b, seen twice (raw count at the top order): D2 = 1.
    assert model[("<s>", "a", "b")][0] == pytest.approx(math.log10((2 - 1) / 2 + 0.5 * p_b_given_a), abs=1e-5)
    assert len([k for k in model if len(k) == 3]) == 7


@pytest.mark.parametrize("prune", [(0,), (0, 1, 1)])
def test_every_context_sums_to_one_in_kenlm(tmp_path: Path, prune: tuple[int, ...]) -> None:
    path = tmp_path / "model.arpa"
    train_arpa(corpus(), path, order=3, prune=prune)
    arpa = read_arpa(path)
    lm = kenlm.Model(str(path))
    vocabulary = [w for (w, *rest) in arpa if not rest and w != "<s>"]
    contexts = [k for k in arpa if len(k) < 3 and arpa[k][1] != 0.0 and "</s>" not in k]
    rng = random.Random(0)
    chosen = [("<s>",), *rng.sample([c for c in contexts if len(c) == 1], 15)]
    chosen += rng.sample([c for c in contexts if len(c) == 2], 15)
    for context in chosen:
        state, after = kenlm.State(), kenlm.State()
        if context[0] == "<s>":
            lm.BeginSentenceWrite(state)
            context = context[1:]
        else:
            lm.NullContextWrite(state)
        for word in context:
            lm.BaseScore(state, word, after)
            state, after = after, state
        total = sum(10 ** lm.BaseScore(state, word, after) for word in vocabulary)
        assert total == pytest.approx(1.0, abs=2e-4), context


def test_backoffs_are_consistent_with_probabilities(tmp_path: Path) -> None:
    """b(h) = (1 - sum of p(w|h) over w seen after h) / (1 - sum of p(w|h') over the same w)."""
    path = tmp_path / "model.arpa"
    train_arpa(corpus(), path, order=3, prune=(0, 1, 1))
    arpa = read_arpa(path)
    followers: dict[tuple[str, ...], list[str]] = {}
    for ngram in arpa:
        if len(ngram) > 1:
            followers.setdefault(ngram[:-1], []).append(ngram[-1])
    for context, words in list(followers.items())[:300]:
        seen = sum(10 ** arpa[(*context, w)][0] for w in words)
        lower = sum(10 ** arpa_log10(arpa, context[1:], w) for w in words)
        expected = math.log10((1 - seen) / (1 - lower))
        assert arpa[context][1] == pytest.approx(expected, abs=2e-4), context


def test_kenlm_scores_equal_the_arpa_arithmetic(tmp_path: Path) -> None:
    path = tmp_path / "model.arpa.gz"
    train_arpa(corpus(), path, order=3, prune=(0, 0, 1))
    lm = kenlm.Model(str(path))
    plain = tmp_path / "model.arpa"
    train_arpa(corpus(), plain, order=3, prune=(0, 0, 1))
    arpa = read_arpa(plain)
    sentence = "the film was released in the united states and the zzzunseen word ."
    words = ["<s>", *sentence.split(), "</s>"]
    by_hand = sum(arpa_log10(arpa, tuple(words[max(0, i - 2) : i]), words[i]) for i in range(1, len(words)))
    assert lm.score(sentence) == pytest.approx(by_hand, abs=1e-4)


def test_prune_thresholds_are_validated(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unigrams"):
        train_arpa(TINY, tmp_path / "m.arpa", order=2, prune=(1,))
    with pytest.raises(ValueError, match="decrease"):
        train_arpa(TINY, tmp_path / "m.arpa", order=3, prune=(0, 2, 1))


@pytest.mark.skipif(shutil.which("lmplz") is None, reason="KenLM's lmplz is not on PATH")
@pytest.mark.parametrize("prune", [(0,), (0, 1, 2)])
def test_same_model_as_lmplz(tmp_path: Path, prune: tuple[int, ...]) -> None:
    text = tmp_path / "corpus.txt"
    text.write_text("\n".join(corpus()) + "\n", encoding="utf-8")
    reference = tmp_path / "lmplz.arpa"
    command = ["lmplz", "-o", "4", "--text", str(text), "--arpa", str(reference), "-S", "10%"]
    if any(prune):
        command += ["--prune", *map(str, prune)]
    subprocess.run(command, check=True, capture_output=True)
    ours = tmp_path / "ours.arpa"
    train_arpa(corpus(), ours, order=4, prune=prune)
    expected, got = read_arpa(reference), read_arpa(ours)
    assert got.keys() == expected.keys()
    for ngram, (log_prob, backoff) in expected.items():
        assert got[ngram][0] == pytest.approx(log_prob, abs=2e-5), ngram
        assert got[ngram][1] == pytest.approx(backoff, abs=2e-5), ngram
