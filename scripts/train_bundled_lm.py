"""Reproduce the bundled language models (dataclean/data/lm/) and their held-out eval fixtures.

    python scripts/train_bundled_lm.py [--data DIR] [--trainer auto|lmplz|python]
    (DIR: the reference corpora, default $DATACLEAN_SHARED_DATA; see benchmarks/corpus.py)

English: the 17 Project Gutenberg books and the WikiText-2 *valid* set, detokenized (the corpora
are tokenized, our scoring input is raw text). WikiText-2 *test* is kept out for evaluation.
Chinese: the CMRC2018 Wikipedia paragraphs except every tenth one, which is kept out.
Held-out texts are written to tests/fixtures/lm/ so the AUC test runs without the corpora.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's dataclean, installed or not

from dataclean.lm.train import train_model  # noqa: E402

MODELS = ROOT / "dataclean" / "data" / "lm"
FIXTURES = ROOT / "tests" / "fixtures" / "lm"

# Settings of the bundled models: small enough to ship (a few MB gzipped), see the README there.
SETTINGS = {
    "en": {"order": 4, "vocab_size": 8000, "prune": (0, 1, 2), "character_coverage": 1.0},
    "zh": {"order": 4, "vocab_size": 8000, "prune": (0, 0, 1), "character_coverage": 0.9995},
}
HELD_OUT_EN = 300  # WikiText-2 test paragraphs in the fixture
HELD_OUT_ZH_EVERY = 10  # every tenth CMRC2018 paragraph is held out

_NO_SPACE_BEFORE = {",", ".", ";", ":", "?", "!", ")", "]", "}", "%", "...", "n't"}
_NO_SPACE_AFTER = {"(", "[", "{", "$", "£"}
_CLITIC = re.compile(r"^'(s|d|ll|ve|re|m|em|t)$")


def detokenize(line: str) -> str:
    """Undo WikiText/Gutenberg tokenization: ` @-@ `, spaces around punctuation, quotes, <unk>."""
    line = line.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".")
    line = line.replace("``", '"').replace("''", '"')
    out: list[str] = []
    glue_next = False
    quote_open = False
    for token in line.split():
        if token in ("<unk>", "_"):
            continue
        glue = glue_next or token in _NO_SPACE_BEFORE or bool(_CLITIC.match(token))
        glue_next = token in _NO_SPACE_AFTER
        if token == '"':
            glue = quote_open or glue_next
            glue_next = not quote_open
            quote_open = not quote_open
        if glue and out:
            out[-1] += token
        else:
            out.append(token)
    return " ".join(out)


def wikitext_paragraphs(path: Path) -> list[str]:
    """Detokenized paragraphs of a WikiText file, without headings and blank lines."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [detokenize(line) for line in lines if line.strip() and not line.strip().startswith("=")]


def english_corpus(data: Path) -> list[str]:
    books = sorted((data / "en" / "gutenberg").glob("*.txt"))
    lines = [detokenize(line) for book in books for line in book.read_text().splitlines()]
    return [line for line in lines if line] + wikitext_paragraphs(data / "en" / "wikitext2" / "valid.txt")


def boilerplate_lines(data: Path) -> list[str]:
    """Web lines repeated across at least 3 documents of the Common Crawl sample: boilerplate."""
    counts: Counter[str] = Counter()
    path = next((data / "web").glob("*.jsonl.gz"))
    with gzip.open(path, "rt", encoding="utf-8") as source:
        for record in source:
            lines = {line.strip() for line in json.loads(record)["text"].split("\n")}
            counts.update(line for line in lines if 10 < len(line) < 120 and line.isascii())
    return sorted(line for line, count in counts.items() if count >= 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=os.environ.get("DATACLEAN_SHARED_DATA"))
    parser.add_argument("--trainer", default="auto", choices=("auto", "lmplz", "python"))
    args = parser.parse_args()
    if args.data is None:
        parser.error("give --data DIR (the reference corpora) or set DATACLEAN_SHARED_DATA")
    data = Path(args.data)
    FIXTURES.mkdir(parents=True, exist_ok=True)

    test = wikitext_paragraphs(data / "en" / "wikitext2" / "test.txt")
    step = max(1, len(test) // HELD_OUT_EN)
    held_out_en = [paragraph for paragraph in test[::step] if len(paragraph.split()) >= 20]
    (FIXTURES / "wikitext2_test_en.txt").write_text("\n".join(held_out_en[:HELD_OUT_EN]) + "\n")
    (FIXTURES / "boilerplate_en.txt").write_text("\n".join(boilerplate_lines(data)) + "\n")

    paragraphs = (data / "zh" / "cmrc2018" / "cmrc2018_contexts_dedup.txt").read_text().splitlines()
    held = {i for i in range(len(paragraphs)) if i % HELD_OUT_ZH_EVERY == HELD_OUT_ZH_EVERY - 1}
    (FIXTURES / "cmrc2018_heldout_zh.txt").write_text("\n".join(paragraphs[i] for i in sorted(held)) + "\n")
    corpora = {
        "en": (
            english_corpus(data),
            "17 Project Gutenberg books (NLTK selection, public domain) and WikiText-2 valid "
            "(Wikipedia, CC BY-SA 3.0), detokenized",
        ),
        "zh": (
            [p for i, p in enumerate(paragraphs) if i not in held],
            "CMRC2018 dev+trial context paragraphs (Chinese Wikipedia, CC BY-SA 4.0) except every "
            "tenth paragraph",
        ),
    }
    for lang, (texts, source) in corpora.items():
        info = train_model(
            texts,
            MODELS / lang,
            trainer=args.trainer,
            metadata={"lang": lang, "training_data": source},
            **SETTINGS[lang],  # type: ignore[arg-type]
        )
        print(lang, json.dumps({k: info[k] for k in ("trainer", "lines", "pieces", "ngrams") if k in info}))


if __name__ == "__main__":
    main()
