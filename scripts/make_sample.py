"""Build the bundled sample corpus (dataclean/data/sample/) from the reference corpora.

Real text with real dirt, plus dirt injected on purpose so every stage has work on the sample:
control characters, undecodable bytes, zero-width and exotic spaces, mojibake, degenerate
repetitions, random-byte garbage, empty documents, exact and near duplicates across shards, long
documents for splitting, and shuffled-word text for the perplexity filter. Deterministic (seeded).

    python scripts/make_sample.py [--data DIR]   (default: $DATACLEAN_SHARED_DATA, see benchmarks/corpus.py)
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

OUT = Path(__file__).resolve().parent.parent / "dataclean" / "data" / "sample"


def detokenize(line: str) -> str:
    """WikiText/Gutenberg tokenization back to prose (" @-@ " -> "-", " ," -> ",", ...)."""
    line = re.sub(r" @(.)@ ", r"\1", line)
    line = re.sub(r" ([,.;:!?)\]}'%])", r"\1", line)
    line = re.sub(r"([(\[{$]) ", r"\1", line)
    line = re.sub(r" (n't|'s|'re|'ve|'d|'ll|'m)\b", r"\1", line)
    line = re.sub(r'" (.*?) "', r'"\1"', line)
    return line.replace("<unk>", "unk").strip()


def wikitext_articles(path: Path) -> list[str]:
    articles: list[list[str]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if re.match(r"^ = [^=].* = $", line):
            articles.append([line.strip(" =")])
        elif line.strip() and articles:
            heading = re.match(r"^ (=+) (.*) \1 $", line)
            articles[-1].append(heading.group(2) if heading else detokenize(line))
    return ["\n\n".join(a) for a in articles if len(a) > 3]


def mojibake(text: str) -> str:
    """UTF-8 bytes read as Windows-1252 (bytes it leaves undefined read as Latin-1)."""
    import ftfy.bad_codecs  # noqa: F401 - registers the "sloppy-windows-1252" codec

    return text.encode("utf-8").decode("sloppy-windows-1252")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default=os.environ.get("DATACLEAN_SHARED_DATA"))
    args = parser.parse_args()
    if not args.data:
        parser.error("give --data DIR (the reference corpora) or set DATACLEAN_SHARED_DATA")
    data = Path(args.data)
    rng = random.Random(20261129)
    OUT.mkdir(parents=True, exist_ok=True)

    # Shard 1: raw English web documents (dolma format, own ids), with injected dirt.
    with gzip.open(data / "web" / "CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz", "rt") as f:
        web = [json.loads(line) for line in f][:160]
    lines: list[bytes] = []
    for n, record in enumerate(web):
        text = record["text"]
        if n % 10 == 1:
            text = text.replace(" ", "\u00a0", 5).replace("e", "e\u200b", 3)
        if n % 10 == 2:
            text = "\x07\x1b[0m" + text + "\x00\x0c"
        if n % 10 == 3:
            paragraphs = text.split("\n")
            paragraphs[0] = mojibake(paragraphs[0] + " — it’s “quoted” café")
            text = "\n".join(paragraphs)
        if n % 25 == 4:
            text = text[:300] + " " + "ha" * 150 + " " + text[300:600]
        record = {**record, "text": text}
        raw = json.dumps(record, ensure_ascii=False).encode("utf-8")
        if n % 10 == 5:  # undecodable bytes inside the JSON string
            raw = raw.replace(b'"text": "', b'"text": "\xff\xfe\x80', 1)
        lines.append(raw)
    lines.append(json.dumps({"id": "web-empty", "text": " \n\t "}).encode())
    lines.append(
        json.dumps(
            {"id": "web-garbage", "text": bytes(rng.randrange(256) for _ in range(600)).decode("latin-1")}
        ).encode()
    )
    lines.append(json.dumps({"id": "web-dup-of-zh", "text": "PLACEHOLDER"}).encode())
    (OUT / "web.jsonl").write_bytes(b"\n".join(lines) + b"\n")

    # Shard 2: Chinese Wikipedia paragraphs and a novel's chapters (hongloumeng has U+FF0E
    # full-width periods, private-use characters and web boilerplate of its own).
    cmrc = (data / "zh" / "cmrc2018" / "cmrc2018_contexts_dedup.txt").read_text().splitlines()
    hlm = (data / "zh" / "hongloumeng" / "hongloumeng.txt").read_text()
    chapters = [c for c in re.split(r"\n\s*\n(?=\s*上卷|\s*下卷)", hlm) if len(c) > 2000][:6]
    zh_rows = []
    for n, text in enumerate(cmrc[:170]):
        if n % 12 == 1:
            text = text.replace("，", "，\u3000", 2)
        if n % 12 == 2:
            text = mojibake(text[:80]) + text[80:]
        if n % 12 == 3:
            text = text[:100] + "\x02\x03" + text[100:]
        zh_rows.append({"id": f"zh-{n:04d}", "text": text, "source": "cmrc2018"})
    for n, text in enumerate(chapters):
        zh_rows.append({"id": f"hlm-{n:02d}", "text": text.strip(), "source": "hongloumeng"})
    for n in range(0, 40, 4):  # exact duplicates (whitespace and case differences) and near ones
        original = zh_rows[n]["text"]
        zh_rows.append({"id": f"zh-copy-{n:04d}", "text": original + " ", "source": "copy"})
        chars = list(original)
        for _ in range(max(1, len(chars) // 50)):
            chars[rng.randrange(len(chars))] = rng.choice("的了是在不")
        zh_rows.append({"id": f"zh-near-{n:04d}", "text": "".join(chars), "source": "near-copy"})
    zh_rows.append({"id": "zh-repeat", "text": "这是一个测试。" + "哈" * 300, "source": "injected"})
    shuffled = list(cmrc[500])
    rng.shuffle(shuffled)
    zh_rows.append({"id": "zh-shuffled", "text": "".join(shuffled), "source": "injected"})
    with gzip.open(OUT / "zh.jsonl.gz", "wt", encoding="utf-8") as f:
        for row in zh_rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    # The web shard's placeholder becomes an exact copy of a Chinese paragraph (cross-shard dup).
    web_bytes = (
        (OUT / "web.jsonl")
        .read_bytes()
        .replace(b"PLACEHOLDER", json.dumps(zh_rows[5]["text"], ensure_ascii=False)[1:-1].encode())
    )
    (OUT / "web.jsonl").write_bytes(web_bytes)

    # Shard 3: long English articles (WikiText, detokenized) for the split stage, no id column,
    # plus shuffled-word and boilerplate texts for the perplexity filter.
    articles = wikitext_articles(data / "en" / "wikitext2" / "valid.txt")[:30]
    words = " ".join(articles[:3]).split()
    rng.shuffle(words)
    texts = [
        *articles,
        " ".join(words[:400]),
        "Home | About | Contact | Login | Register | Privacy Policy | Terms of Use | "
        "Cookie Settings | Sitemap | © 2019 All rights reserved | " * 8,
    ]
    table = pa.table({"text": texts, "source": ["wikitext2"] * len(articles) + ["injected"] * 2})
    pq.write_table(table, OUT / "wiki.parquet", compression="zstd")
    total = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"wrote {OUT}: {len(lines)} + {len(zh_rows)} + {len(texts)} documents, {total / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
