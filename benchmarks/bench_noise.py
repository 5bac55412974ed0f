"""How often the clean stage's not-language checks (`random_bytes`, `encoded_data`) drop real text,
and how often they catch random bytes, binary files and encoded blobs.

    python benchmarks/bench_noise.py --data DATA_DIR [--json PATH]

Labeled data nobody here wrote, each row labeled by where it comes from:
- text (must be kept): the bundled sample (but `web-garbage`), and under DATA_DIR the second half
  of the Common Crawl documents, WikiText-2 test, the second half of cmrc2018 and of Hongloumeng
  (the model was built from the other halves, see scripts/build_random_bytes_model.py), the
  big list of naughty strings (blns), and, with `babel` installed, one line per CLDR locale
  (its month, day and territory names: real words in 300+ languages, many in scripts that no
  language model covers: Cherokee, N'Ko, Vai, Tifinagh, Ol Chiki, Syriac, Yi);
- not text (must be dropped): random bytes read as Latin-1, Windows-1252 and UTF-8 (seeded),
  base64 of random bytes (plain and MIME-wrapped), hex, and slices of this machine's binary files
  read as Latin-1 and as UTF-8 (these also hold real strings: a slice that is mostly a message
  table is text, so the recall on binaries is below 1 by the data, not only by the check).
Each text goes through `clean_text` first, as in the stage; rows under the judged length
(40 characters, combining marks not counted) are not judged and not counted. Prints, per set,
rows judged and the share dropped, and the texts dropped from the text sets.
"""

from __future__ import annotations

import argparse
import base64
import glob
import gzip
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dataclean.stages.clean import CleanText, clean_text
from dataclean.text.noise import noise_reasons, noise_scores

SAMPLE = Path(__file__).resolve().parent.parent / "dataclean" / "data" / "sample"


def _half(texts: list[str]) -> list[str]:
    return texts[len(texts) // 2 :]


def _gzip_lines(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        return [line for line in lines if line.strip()]


def text_sets(data: Path | None) -> dict[str, list[str]]:
    sets: dict[str, list[str]] = {}
    web = [
        json.loads(line)
        for line in (SAMPLE / "web.jsonl").read_bytes().decode("utf-8", "replace").splitlines()
    ]
    sets["sample/web"] = [row["text"] for row in web if row["id"] != "web-garbage"]
    sets["sample/wiki"] = pq.read_table(SAMPLE / "wiki.parquet").column("text").to_pylist()
    sets["sample/zh"] = [json.loads(line)["text"] for line in _gzip_lines(SAMPLE / "zh.jsonl.gz")]
    if data is not None:
        [crawl] = glob.glob(str(data / "web" / "*.jsonl.gz"))
        sets["common_crawl"] = _half([json.loads(line)["text"] for line in _gzip_lines(Path(crawl))])
        sets["wikitext2_test"] = [
            s for s in (data / "en/wikitext2/test.txt").read_text().split("\n") if s.strip()
        ]
        for name, path in (("cmrc2018", "zh/cmrc2018/cmrc2018_contexts_dedup.txt"),
                           ("hongloumeng", "zh/hongloumeng/hongloumeng.txt")):  # fmt: skip
            lines = (data / path).read_text(errors="replace").split("\n")
            sets[name] = _half([line for line in lines if line.strip()])
        lines = (data / "blns/blns.txt").read_text().split("\n")
        sets["blns"] = [line for line in lines if line.strip() and not line.startswith("#")]
    try:
        from babel import Locale, localedata
    except ImportError:
        return sets
    cldr = []
    for code in localedata.locale_identifiers():
        if "_" not in code:
            locale = Locale.parse(code)
            names = [*locale.months["format"]["wide"].values(), *locale.days["format"]["wide"].values()]
            cldr.append(" ".join([*names, *list(locale.territories.values())[:40]]))
    sets["cldr_locales"] = cldr
    return sets


def noise_sets(seed: int = 7) -> dict[str, list[str]]:
    rng = random.Random(seed)
    sizes = [50, 80, 150, 300, 1000, 3000]

    def blobs(count: int) -> list[bytes]:
        return [rng.randbytes(rng.choice(sizes)) for _ in range(count)]

    sets = {
        "random_latin1": [b.decode("latin-1") for b in blobs(300)],
        "random_cp1252": [b.decode("cp1252", "replace") for b in blobs(300)],
        "random_utf8": [b.decode("utf-8", "replace") for b in blobs(200)],
        "base64": [base64.b64encode(b).decode() for b in blobs(200)],
        "base64_mime": [base64.encodebytes(b * 2).decode() for b in blobs(100)],
        "hex": [b.hex() for b in blobs(100)],
    }
    files = sorted(p for p in glob.glob("/usr/lib/x86_64-linux-gnu/*.so*") if Path(p).is_file())
    rng.shuffle(files)
    slices = []
    for path in files[:150]:
        raw = Path(path).read_bytes()
        if len(raw) > 5000:
            start = rng.randrange(0, len(raw) - 4000)
            slices.append(raw[start : start + rng.choice([200, 1000, 3000])])
    sets["binary_latin1"] = [s.decode("latin-1") for s in slices]
    sets["binary_utf8"] = [s.decode("utf-8", "replace") for s in slices]
    return sets


def evaluate(sets: dict[str, list[str]], stage: CleanText) -> dict[str, dict[str, object]]:
    results: dict[str, dict[str, object]] = {}
    for name, texts in sets.items():
        cleaned = pa.array([clean_text(t) for t in texts], pa.string())
        reasons = noise_reasons(
            cleaned, stage.max_random_score, stage.max_encoded_fraction, stage.min_judged_chars
        )
        lengths = noise_scores(cleaned)[2]
        judged = [i for i, length in enumerate(lengths.tolist()) if length >= stage.min_judged_chars]
        dropped = [i for i in judged if reasons[i]]
        results[name] = {
            "judged": len(judged),
            "dropped": len(dropped),
            "share": round(len(dropped) / max(len(judged), 1), 4),
            "examples": [f"{reasons[i]}: {cleaned[i].as_py()[:90]!r}" for i in dropped[:5]],
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    stage = CleanText()
    report = {"text": evaluate(text_sets(args.data), stage), "not_text": evaluate(noise_sets(), stage)}
    for side, results in report.items():
        print(f"{side} ({'share dropped: should be 0' if side == 'text' else 'share dropped: recall'})")
        for name, result in results.items():
            print(
                f"  {name:16s} judged {result['judged']:5d}  "
                f"dropped {result['dropped']:4d}  {result['share']:.3f}"
            )
            if side == "text":
                for example in result["examples"]:
                    print(f"      {example}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
