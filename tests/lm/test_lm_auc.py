"""Held-out evaluation: the bundled models separate clean text from damaged text (AUC >= 0.95).

Clean: WikiText-2 test paragraphs (English) and every tenth CMRC2018 paragraph (Chinese), both
kept out of training. Damaged: the same texts with words (characters) shuffled, 30% of the
characters garbled, or replaced by web boilerplate. README.md reports these numbers.
"""

from __future__ import annotations

import pytest

from dataclean.lm import evaluate, load_model
from tests.conftest import FIXTURE_ROOT

FIXTURES = FIXTURE_ROOT / "lm"
BOILERPLATE = (FIXTURES / "boilerplate_en.txt").read_text(encoding="utf-8").splitlines()
CASES = {
    "en": (
        "wikitext2_test_en.txt",
        {
            "shuffle_words": evaluate.shuffle_words,
            "garble_chars": evaluate.garble_chars,
            "boilerplate": evaluate.boilerplate_replacer(BOILERPLATE),
        },
    ),
    "zh": (
        "cmrc2018_heldout_zh.txt",
        {"shuffle_chars": evaluate.shuffle_chars, "garble_chars": evaluate.garble_chars},
    ),
}


@pytest.mark.parametrize("lang", sorted(CASES))
def test_held_out_auc_at_least_095(lang: str) -> None:
    fixture, damages = CASES[lang]
    texts = (FIXTURES / fixture).read_text(encoding="utf-8").splitlines()
    model = load_model(lang)
    clean = model.perplexities(texts)
    for name, damage in damages.items():
        damaged = model.perplexities(evaluate.damage_all(texts, damage, seed=1))
        auc = evaluate.auc(clean, damaged)
        print(f"{lang} {name}: AUC {auc:.4f} on {len(texts)} held-out texts")
        assert auc >= 0.95, (lang, name, auc)


def test_auc_is_the_mann_whitney_statistic() -> None:
    assert evaluate.auc([1.0, 2.0], [3.0, 4.0]) == 1.0
    assert evaluate.auc([3.0, 4.0], [1.0, 2.0]) == 0.0
    assert evaluate.auc([1.0, 2.0], [2.0, 1.0]) == 0.5
    assert evaluate.auc([1.0, 3.0], [2.0, float("nan")]) == 0.5
