"""Benchmark corpora built from the reference data folder, or generated text.

The folder holds real text nobody on the team wrote: `web/*.jsonl.gz` (raw Common Crawl WET
documents), `en/wikitext2/` (WikiText-2 `valid.txt`, `test.txt`), `en/gutenberg/` (Project
Gutenberg books), `zh/cmrc2018/` (`cmrc2018_contexts_dedup.txt`, CMRC 2018 Wikipedia paragraphs)
and `zh/hongloumeng/` (`hongloumeng.txt`). A clone has none: it is given on the command line
(`--data PATH`, see `add_data_argument`), else $DATACLEAN_SHARED_DATA. A folder that is missing is
a clear error, never a silent switch to generated text (that takes `--generated`). Read
`corpus.SHARED` at call time: `use_data` changes it (and the environment, so benchmark
subprocesses read the same folder).

Benchmarks only: tests never import this module.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _shared_data() -> Path:
    """$DATACLEAN_SHARED_DATA; without it a folder that does not exist (`use_data` then says so)."""
    return Path(os.environ.get("DATACLEAN_SHARED_DATA") or ROOT / "benchmarks" / "no-reference-data")


SHARED = _shared_data()
GENERATED = os.environ.get("DATACLEAN_BENCH_GENERATED") == "1"  # --generated, here or in a parent


def have_shared() -> bool:
    return not GENERATED and (SHARED / "web").is_dir()


def add_data_argument(parser: argparse.ArgumentParser) -> None:
    """`--data PATH` (the reference data folder) and `--generated` (use generated text)."""
    parser.add_argument(
        "--data", type=Path, default=None, help=f"reference data folder (en/, zh/, web/); default {SHARED}"
    )
    parser.add_argument("--generated", action="store_true", help="generated text instead of --data")


def use_data(path: Path | None, generated: bool = False) -> None:
    """Point the benchmarks at `path` (or the default folder): a clear error if it is missing."""
    global SHARED, GENERATED
    GENERATED = generated
    if generated:
        os.environ["DATACLEAN_BENCH_GENERATED"] = "1"
        return
    folder = Path(path) if path is not None else SHARED
    missing = [name for name in ("en", "zh", "web") if not (folder / name).is_dir()]
    if missing:
        raise SystemExit(
            f"--data {folder}: no reference data there (missing {', '.join(missing)}/); give the "
            "folder with --data PATH, or --generated for generated text"
        )
    SHARED = folder
    os.environ["DATACLEAN_SHARED_DATA"] = str(folder)
    os.environ["DATACLEAN_BENCH_GENERATED"] = "0"


def web_docs() -> list[str]:
    """697 raw Common Crawl documents (English web text with its real dirt)."""
    path = next((SHARED / "web").glob("*.jsonl.gz"))
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def zh_docs() -> list[str]:
    """CMRC2018 Wikipedia paragraphs and 红楼梦 paragraphs (with its web boilerplate)."""
    cmrc = (SHARED / "zh" / "cmrc2018" / "cmrc2018_contexts_dedup.txt").read_text().splitlines()
    novel = (SHARED / "zh" / "hongloumeng" / "hongloumeng.txt").read_text()
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", novel) if len(p.strip()) > 200]
    return [line for line in cmrc if line.strip()] + paragraphs


def generated_docs(count: int = 2000, seed: int = 0) -> list[str]:
    """Stand-in text for --generated: mixed English/Chinese word salad."""
    rng = random.Random(seed)
    words = [
        "the",
        "of",
        "and",
        "a",
        "to",
        "in",
        "is",
        "was",
        "that",
        "for",
        "on",
        "with",
        "as",
        "by",
        "at",
        "from",
        "data",
        "model",
        "text",
    ]
    han = (
        "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动"
        "同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加"
    )
    docs = []
    for _ in range(count):
        if rng.random() < 0.5:
            sentence = " ".join(rng.choice(words) for _ in range(rng.randint(50, 600)))
            docs.append(sentence.capitalize() + ".")
        else:
            docs.append("".join(rng.choice(han) for _ in range(rng.randint(50, 800))) + "。")
    return docs


def mojibake(text: str) -> str:
    """UTF-8 bytes read as Windows-1252 (undefined bytes as Latin-1)."""
    import ftfy.bad_codecs  # noqa: F401 - registers "sloppy-windows-1252"

    return text.encode("utf-8").decode("sloppy-windows-1252")


def clean_benchmark_corpus(repeat: int = 4, seed: int = 1) -> list[str]:
    """Web + Chinese documents, `repeat` times, with mojibake put into 3% of them."""
    base = web_docs() + zh_docs() if have_shared() else generated_docs()
    rng = random.Random(seed)
    docs = []
    for _ in range(repeat):
        for doc in base:
            if doc and rng.random() < 0.03:
                cut = min(len(doc), 200)
                doc = mojibake(doc[:cut]) + doc[cut:]
            docs.append(doc)
    return docs
