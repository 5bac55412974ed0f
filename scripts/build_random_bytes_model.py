"""Build dataclean/data/clean/random_bytes.json, the clean stage's random-bytes check (see
dataclean.text.noise): character class bigram log-probabilities of real text against random bytes.

    python scripts/build_random_bytes_model.py TEXT_FILE... [--out PATH]

Text side: every line of each TEXT_FILE (.txt, or .jsonl/.jsonl.gz with a `text` field; a path
may end in `:first-half` to read only the first half of its documents, keeping the rest for
evaluation), cleaned by `clean_text`. Random side: 4 MB of random bytes (seeded) decoded as
Latin-1 and as Windows-1252, cut into 1-4 KB documents and cleaned the same way: what such bytes
look like when they reach the check. Counts are add-one smoothed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from dataclean.stages.clean import clean_text
from dataclean.text.noise import _CLASSES, MARK, class_table

OUT = Path(__file__).resolve().parent.parent / "dataclean" / "data" / "clean" / "random_bytes.json"


def _documents(spec: str) -> Iterator[str]:
    path, _, part = spec.partition(":")
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as lines:
        if ".jsonl" in path:
            texts = [json.loads(line)["text"] for line in lines if line.strip()]
        else:
            texts = [line.rstrip("\n") for line in lines if line.strip()]
    yield from texts[: len(texts) // 2] if part == "first-half" else texts


def _random_documents(seed: int = 0, total: int = 4 << 20) -> Iterator[str]:
    rng = random.Random(seed)
    made = 0
    while made < total:
        raw = rng.randbytes(rng.randint(1024, 4096))
        made += len(raw)
        yield raw.decode("latin-1")
        yield raw.decode("cp1252", errors="replace")


def class_bigrams(texts: Iterator[str]) -> np.ndarray:
    """Add-one smoothed counts [previous class, class] over the cleaned texts (a text starts
    after a space)."""
    table = class_table()
    counts = np.ones((len(_CLASSES), len(_CLASSES)), np.float64)
    for text in texts:
        cleaned = clean_text(text)
        if not cleaned:
            continue
        classes = table[np.frombuffer(cleaned.encode("utf-32-le"), np.uint32)]
        classes = classes[classes != MARK]
        if not len(classes):
            continue
        np.add.at(counts, (np.concatenate([[0], classes[:-1]]), classes), 1)
    return counts


def _log_conditional(counts: np.ndarray) -> np.ndarray:
    return np.log(counts / counts.sum(axis=1, keepdims=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("texts", nargs="+")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    text = class_bigrams(doc for spec in args.texts for doc in _documents(spec))
    noise = class_bigrams(_random_documents())
    ratio = _log_conditional(noise) - _log_conditional(text)
    model = {
        "about": "log P(class | previous class): random bytes read as Latin-1/Windows-1252 minus real "
        "text, add-one smoothed; built by scripts/build_random_bytes_model.py from: "
        + ", ".join(
            Path(spec.partition(":")[0]).name + (":first-half" if spec.endswith(":first-half") else "")
            for spec in args.texts
        ),
        "classes": list(_CLASSES),
        "text_characters": int(text.sum()),
        "random_characters": int(noise.sum()),
        "log_ratio": np.round(ratio, 4).tolist(),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(model, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
