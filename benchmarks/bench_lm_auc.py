"""How well the bundled reference models separate clean from damaged text: every AUC README gives.

    python benchmarks/bench_lm_auc.py [--sentences 1000]

Clean text: the held-out fixtures the tests use (tests/fixtures/lm: 255 WikiText-2 test
paragraphs, 110 CMRC2018 paragraphs, both kept out of training), as paragraphs and cut into single
sentences (English after . ! ? before a capital or a quote, Chinese after 。！？; at least 5 words
or 10 characters; the first `--sentences`). Damaged: the same texts with words (Chinese:
characters) shuffled, 30/20/10/5% of their characters garbled (`dataclean.lm.evaluate.garble_chars`),
or replaced by web boilerplate (English). AUC: the probability that a damaged text scores a higher
perplexity than a clean one (`dataclean.lm.evaluate.auc`, the Mann-Whitney statistic).
tests/lm/test_lm_auc.py asserts the paragraph rows at 30% >= 0.95; this script prints them all.
"""

from __future__ import annotations

import argparse
import functools
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dataclean.lm import evaluate, load_model

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "lm"
FILES = {"en": "wikitext2_test_en.txt", "zh": "cmrc2018_heldout_zh.txt"}
RATES = (0.3, 0.2, 0.1, 0.05)


def sentences(texts: list[str], lang: str, limit: int) -> list[str]:
    found: list[str] = []
    for text in texts:
        if lang == "en":
            found += [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z\"])", text) if len(s.split()) >= 5]
        else:
            found += [s for s in re.split(r"(?<=[。！？])", text) if len(s) >= 10]
    return found[:limit]


def damages(lang: str) -> dict[str, evaluate.Damage]:
    found: dict[str, evaluate.Damage] = {
        "shuffled": evaluate.shuffle_words if lang == "en" else evaluate.shuffle_chars
    }
    for rate in RATES:
        found[f"{rate:.0%} garbled"] = functools.partial(evaluate.garble_chars, rate=rate)
    if lang == "en":
        lines = (FIXTURES / "boilerplate_en.txt").read_text(encoding="utf-8").splitlines()
        found["boilerplate"] = evaluate.boilerplate_replacer(lines)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=1000)
    args = parser.parse_args()
    for lang, name in FILES.items():
        model = load_model(lang)
        paragraphs = (FIXTURES / name).read_text(encoding="utf-8").splitlines()
        for unit, texts in (
            ("paragraphs", paragraphs),
            ("sentences", sentences(paragraphs, lang, args.sentences)),
        ):
            clean = model.perplexities(texts)
            print(f"{lang} {unit} ({len(texts)}): median perplexity clean {statistics.median(clean):,.0f}")
            for damage, function in damages(lang).items():
                damaged = model.perplexities(evaluate.damage_all(texts, function, seed=1))
                print(
                    f"  {damage:12} AUC {evaluate.auc(clean, damaged):.3f}   "
                    f"median perplexity {statistics.median(damaged):,.0f}"
                )


if __name__ == "__main__":
    main()
