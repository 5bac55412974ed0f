"""Build `tests/fixtures/quality/cc_languages.jsonl`: non-English Common Crawl pages with the reason
datatrove gives each, configured from FineWeb-2's config of the page's language.

    python scripts/build_language_fixture.py --data PATH [--per-language 5] [--max-chars 3000]
        [--only ko --append]

Pages: the Common Crawl sample of the reference folder (`PATH/web/*.jsonl.gz`), labeled by the
language stage (lid.176); for every label other than `en` and `und` with at least 5 pages and a
FineWeb-2 config, up to `--per-language` pages of at most `--max-chars` characters (random, seed 5).
Each row: `id` (the page's), `text`, `lang`, `config` (FineWeb-2's), `datatrove` (the first
failing filter's reason of `dataclean.quality.reference.fineweb2_filters`, null when kept).
Needs the `bench` extra (datatrove, spaCy, jieba; SudachiPy and kiwipiepy for ja and ko).
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import random
from pathlib import Path

import pyarrow as pa

from dataclean.lang import identify_languages
from dataclean.quality.fineweb2 import label_configs
from dataclean.quality.reference import datatrove_reasons, fineweb2_filters


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="reference data folder (web/)")
    parser.add_argument("--per-language", type=int, default=5)
    parser.add_argument("--max-chars", type=int, default=3000)
    parser.add_argument("--out", type=Path, default=Path("tests/fixtures/quality/cc_languages.jsonl"))
    parser.add_argument("--only", help="these labels only (comma-separated), each sampled as the first")
    parser.add_argument("--append", action="store_true", help="add the rows to --out, not replace it")
    args = parser.parse_args()
    pages = []
    for path in sorted((args.data / "web").glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            pages += [json.loads(line) for line in f]
    codes = identify_languages(pa.array([page["text"] for page in pages], pa.string()))[0].to_pylist()
    by_language: dict[str, list[int]] = collections.defaultdict(list)
    for index, code in enumerate(codes):
        by_language[code].append(index)
    rng = random.Random(5)
    rows = []
    for code, indexes in sorted(by_language.items(), key=lambda item: (-len(item[1]), item[0])):
        if code in ("en", "und") or len(indexes) < 5 or code not in label_configs():
            continue
        if args.only and code not in args.only.split(","):
            continue
        if args.only:  # the same pages whichever labels came before
            rng = random.Random(5)
        short = [i for i in indexes if len(pages[i]["text"]) <= args.max_chars]
        chosen = sorted(rng.sample(short, min(args.per_language, len(short))))
        config = label_configs()[code]
        try:
            reasons = datatrove_reasons([pages[i]["text"] for i in chosen], fineweb2_filters(config))
        except (ImportError, OSError) as error:  # a tokenizer this machine cannot load
            print(f"{code}: skipped ({error})")
            continue
        for i, reason in zip(chosen, reasons, strict=True):
            rows.append(
                {
                    "id": pages[i]["id"],
                    "text": pages[i]["text"],
                    "lang": code,
                    "config": config,
                    "datatrove": reason,
                }
            )
    with args.out.open("a" if args.append else "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{len(rows)} pages in {len({r['lang'] for r in rows})} languages -> {args.out}")


if __name__ == "__main__":
    main()
