"""Real samples for the pack tests: paragraphs of dataclean's bundled sample, written as a run."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tests.conftest import SAMPLE, sample_web_texts

TOKENIZER = Path(__file__).resolve().parent.parent / "fixtures" / "pack" / "tokenizer.json"


def sample_paragraphs() -> list[str]:
    """Every non-empty paragraph of the bundled sample (English WikiText, web pages, Chinese)."""
    texts = pq.read_table(SAMPLE / "wiki.parquet").column("text").to_pylist() + sample_web_texts()
    with gzip.open(SAMPLE / "zh.jsonl.gz", "rt", encoding="utf-8", errors="replace") as handle:
        texts += [json.loads(line)["text"] for line in handle if line.strip()]
    return [p.strip() for text in texts for p in text.split("\n") if p.strip()]


def cut_to_bytes(text: str, limit: int) -> str:
    """`text` cut to at most `limit` UTF-8 bytes, on a character boundary."""
    return text.encode("utf-8")[:limit].decode("utf-8", errors="ignore")


def write_run(folder: Path, texts: list[str], files: int = 3, weights: list[float] | None = None) -> Path:
    """A dataclean output folder whose data/ holds `texts` in `files` Parquet files."""
    data = folder / "data"
    data.mkdir(parents=True)
    weights = weights or [1.0] * len(texts)
    for k in range(files):
        rows = range(k, len(texts), files)
        pq.write_table(
            pa.table(
                {
                    "id": [f"doc{r}" for r in rows],
                    "text": [texts[r] for r in rows],
                    "weight": [weights[r] for r in rows],
                }
            ),
            data / f"part-{k:05d}.parquet",
        )
    return folder
