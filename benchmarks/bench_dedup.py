"""Dedup: dataclean against datatrove on a labeled corpus of real text, both scored by one truth.

    python benchmarks/bench_dedup.py [--docs 100000] [--shards 16] [--rounds 3] [--data PATH]
                                     [--work /tmp/bench_dedup] [--json OUT]

1. Corpus (`build_corpus`): originals are runs of real sentences (English: Gutenberg, WikiText-2,
   Common Crawl; 20% Chinese: CMRC 2018, Hongloumeng; from the reference data folder, `--data`),
   plus near copies (1-20% of words or characters substituted, deleted or inserted) and exact
   copies (case, spacing and punctuation changed), written as Parquet shards (id, text, lang).
2. Speed, both tools cold and alike: each round runs each tool once, in a rotating order, in a
   fresh process timed from launch to exit (imports, process or Ray start-up included), with 2
   workers, threshold 0.7, reading the shards and writing kept and removed rows as Parquet:
   - dataclean: `python -m dataclean run CORPUS -o OUT --only dedup --workers 2` (embedded Ray
     started and stopped by the run; observe -> fit -> apply; also writes stats and report.html);
   - datatrove: its four MinHash stages (`benchmarks/datatrove_equivalent.py --dedup-only`):
     LocalPipelineExecutor, 2 workers, one task per shard, 14 x 9 bands (what datasketch's
     optimizer picks for 0.7 with 128 hashes), character 5-grams for Chinese.
   Seconds are the median with min-max over rounds; the ratio is the median of the per-round
   ratios (`benchmarks/rounds.py`). Memory of all the run's processes is sampled every 0.5 s.
3. Quality of the last round's outputs against `benchmarks/reference_dedup.py` (exact Jaccard of
   all pairs, written apart from dataclean): duplicate pairs (J >= 0.7) left in the output, and
   rows dropped with no kept row at J >= 0.7.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import corpus as data
from benchmarks import reference_dedup
from benchmarks.bench_scale import dataclean_command, run_measured
from benchmarks.rounds import describe, round_ratios, spread
from dataclean import columns as C

ROOT = Path(__file__).resolve().parents[1]
THRESHOLD = 0.7
WORKERS = 2
EDIT_RATES = (0.01, 0.02, 0.03, 0.05, 0.08, 0.12, 0.2)


# ---------------------------------------------------------------- corpus


def _detokenize(line: str) -> str:
    line = line.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".")
    line = re.sub(r" ([,.;:!?)'])", r"\1", line)
    return line.replace(" n't", "n't").replace("( ", "(")


def sentence_pools() -> dict[str, list[str]]:
    if not data.have_shared():  # generated stand-in text (benchmarks.corpus), split into sentences
        docs = data.generated_docs(4000)
        words = [s for doc in docs if doc.isascii() for s in doc.split(" of ") if len(s.split()) >= 4]
        han = [doc[i : i + 40] for doc in docs if not doc.isascii() for i in range(0, len(doc), 40)]
        return {"en": words, "zh": [s for s in han if len(s) >= 8]}
    english: list[str] = []
    for path in sorted((data.SHARED / "en" / "gutenberg").glob("*.txt")):
        english += [_detokenize(s.strip()) for s in path.read_text(encoding="utf-8").splitlines()]
    for name in ("valid.txt", "test.txt"):
        for line in (data.SHARED / "en" / "wikitext2" / name).read_text(encoding="utf-8").splitlines():
            if not line.strip().startswith("="):
                english += [_detokenize(s) + " ." for s in line.split(" . ")]
    for path in sorted((data.SHARED / "web").glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for line in handle:
                english += [s.strip() for s in json.loads(line)["text"].splitlines()]
    chinese: list[str] = []
    for path in [
        *(data.SHARED / "zh" / "cmrc2018").glob("*.txt"),
        *(data.SHARED / "zh" / "hongloumeng").glob("*.txt"),
    ]:
        text = path.read_text(encoding="utf-8")
        chinese += [s for s in re.split(r"(?<=[。！？])", text.replace("\n", "")) if s.strip()]
    return {
        "en": [s for s in english if len(s.split()) >= 4],
        "zh": [s.strip() for s in chinese if len(s) >= 8],
    }


def make_original(pool: list[str], lang: str, rng: random.Random) -> str:
    target = rng.randint(1200, 3200) // (3 if lang == "zh" else 1)  # bytes ~ 1.2-3.2 KB
    start = rng.randrange(len(pool))
    parts, size = [], 0
    while size < target:
        sentence = pool[(start + len(parts)) % len(pool)] if rng.random() < 0.5 else rng.choice(pool)
        parts.append(sentence)
        size += len(sentence)
    return ("" if lang == "zh" else " ").join(parts)


def near_copy(text: str, lang: str, rate: float, vocabulary: list[str], rng: random.Random) -> str:
    tokens = list(text) if lang == "zh" else text.split()
    for _ in range(max(1, round(len(tokens) * rate))):
        operation = rng.random()
        where = rng.randrange(len(tokens))
        if operation < 0.5:
            tokens[where] = rng.choice(vocabulary)
        elif operation < 0.75 and len(tokens) > 10:
            del tokens[where]
        else:
            tokens.insert(where, rng.choice(vocabulary))
    return ("" if lang == "zh" else " ").join(tokens)


def exact_copy(text: str, rng: random.Random) -> str:
    variants = [str.upper, lambda t: t.replace(" ", "  "), lambda t: t.replace(",", ";"), str.lower]
    return rng.choice(variants)(text) + rng.choice(["", " ", "\n", "!"])


def build_corpus(folder: Path, docs: int, shards: int, seed: int = 7) -> None:
    """Write the labeled corpus as shards, and its labels (id, family, kind, rate) next to them."""
    rng = random.Random(seed)
    pools = sentence_pools()
    vocabulary = {
        "en": [w for s in rng.sample(pools["en"], 20000) for w in s.split()],
        "zh": [c for s in rng.sample(pools["zh"], 5000) for c in s],
    }
    rows: list[tuple[int, str, str, str, float]] = []  # family, lang, text, kind, rate
    family = 0
    while len(rows) < docs:
        lang = "zh" if rng.random() < 0.2 else "en"
        original = make_original(pools[lang], lang, rng)
        rows.append((family, lang, original, "original", 0.0))
        for _ in range(rng.choice([0, 0, 0, 1, 1, 2, 3])):
            if rng.random() < 0.7:
                rate = rng.choice(EDIT_RATES)
                rows.append(
                    (
                        family,
                        lang,
                        near_copy(original, lang, rate, vocabulary[lang], rng),
                        "near",
                        rate,
                    )
                )
            else:
                rows.append((family, lang, exact_copy(original, rng), "exact", 0.0))
        family += 1
    rows = rows[:docs]
    rng.shuffle(rows)
    ids = [f"d{number:07d}" for number in rng.sample(range(10 * docs), len(rows))]
    texts = pa.array([row[2] for row in rows], pa.string())
    table = pa.table({C.ID: ids, C.TEXT: texts, C.LANG: [row[1] for row in rows]})
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for shard in range(shards):
        lo, hi = len(rows) * shard // shards, len(rows) * (shard + 1) // shards
        pq.write_table(table.slice(lo, hi - lo), folder / f"shard-{shard:04d}.parquet")
    labels = pa.table(
        {
            C.ID: ids,
            "family": [row[0] for row in rows],
            "kind": [row[3] for row in rows],
            "rate": [row[4] for row in rows],
        }
    )
    pq.write_table(labels, folder.parent / "labels.parquet")


# ---------------------------------------------------------------- the two tools


def run_dataclean(corpus: Path, out: Path) -> dict[str, Any]:
    """`dataclean run --only dedup` in a fresh process: wall seconds, memory, its own stats."""
    options = ("--only", "dedup", "--set", f"dedup.threshold={THRESHOLD}", "--workers", str(WORKERS))
    seconds, memory = run_measured(dataclean_command(corpus, out, *options), "dataclean dedup")
    stats = json.loads((out / "stats.json").read_text())
    stage = next(s for s in stats["stages"] if s["stage"] == "dedup")
    return {
        "seconds": seconds,
        "inside_seconds": stats["seconds"]["wall"],
        "stage_seconds": round(stage["seconds"], 2),
        "fit_seconds": stage.get("fit_seconds"),
        "total_mib": memory.total / 2**20,
        "driver_mib": memory.driver / 2**20,
        "worker_mib": memory.worker / 2**20,
    }


def datatrove_command(corpus: Path, out: Path, tasks: int, result: Path, *options: str) -> list[str]:
    """benchmarks/datatrove_equivalent.py over CORPUS into OUT, `WORKERS` workers, its figures
    written to RESULT (JSON), as a command."""
    script = str(ROOT / "benchmarks" / "datatrove_equivalent.py")
    options += ("--tasks", str(tasks), "--workers", str(WORKERS), "--json", str(result))
    return [sys.executable, script, str(corpus), str(out), *options]


def run_datatrove(corpus: Path, out: Path, tasks: int) -> dict[str, Any]:
    """datatrove's four MinHash stages in a fresh process: wall seconds, memory, its stage seconds."""
    result = out.parent / f"{out.name}.json"
    seconds, memory = run_measured(
        datatrove_command(corpus, out, tasks, result, "--dedup-only"), "datatrove dedup"
    )
    found = json.loads(result.read_text())
    return {
        "seconds": seconds,
        "inside_seconds": found["seconds"],
        "stage_seconds": found["stage_seconds"],
        "total_mib": memory.total / 2**20,
        "driver_mib": memory.driver / 2**20,
        "largest_child_mib": memory.largest_child / 2**20,
    }


def _ids(folder: Path, column: str = "id", where: tuple[str, str] | None = None) -> list[str]:
    paths = sorted(folder.rglob("*.parquet")) if folder.is_dir() else []
    found: list[str] = []
    for path in paths:
        columns = [column] + ([where[0]] if where else [])
        table = pq.read_table(path, columns=columns)
        if where:
            table = table.filter(pc.equal(table.column(where[0]), where[1]))
        found += table.column(column).to_pylist()
    return found


def dataclean_decisions(out: Path) -> tuple[list[str], list[str]]:
    """Kept ids (data/) and the ids its dedup dropped (excluded/ rows of stage dedup)."""
    return _ids(out / "data"), _ids(out / "excluded", where=("stage", "dedup"))


def datatrove_decisions(out: Path) -> tuple[list[str], list[str]]:
    """Kept ids (out/) and the ids MinhashDedupFilter removed (removed/)."""
    return _ids(out / "out"), _ids(out / "removed")


# ---------------------------------------------------------------- comparison


def truth(corpus: Path) -> tuple[list[str], dict[tuple[int, int], float], float]:
    """The corpus's ids, its pairs at J >= THRESHOLD (reference_dedup) and the seconds it took."""
    table = pa.concat_tables(pq.read_table(path) for path in sorted(corpus.glob("*.parquet")))
    started = time.perf_counter()
    pairs = reference_dedup.similar_pairs(
        table.column("text").to_pylist(), table.column("lang").to_pylist(), THRESHOLD
    )
    return table.column("id").to_pylist(), pairs, time.perf_counter() - started


def compare(
    corpus: Path,
    work: Path,
    rounds: int,
    tasks: int,
    known: tuple[list[str], dict[tuple[int, int], float], float] | None = None,
) -> dict[str, Any]:
    """Both tools, `rounds` rounds in a rotating order; speed per round and quality of the last.
    `known`: the corpus's `truth`, when the caller has it already."""
    outs = {"dataclean": work / "out-dataclean", "datatrove": work / "out-datatrove"}
    runs: dict[str, list[dict[str, Any]]] = {"dataclean": [], "datatrove": []}
    loads = []
    for number in range(max(1, rounds)):
        order = ["dataclean", "datatrove"] if number % 2 == 0 else ["datatrove", "dataclean"]
        for tool in order:
            loads.append(data_load())
            if tool == "dataclean":
                runs[tool].append(run_dataclean(corpus, outs[tool]))
            else:
                runs[tool].append(run_datatrove(corpus, outs[tool], tasks))
            print(
                f"  round {number + 1}: {tool} {runs[tool][-1]['seconds']:.1f} s (load {loads[-1]})",
                flush=True,
            )
    ours = [run["seconds"] for run in runs["dataclean"]]
    theirs = [run["seconds"] for run in runs["datatrove"]]
    ids, pairs, seconds = known or truth(corpus)
    quality = {
        "dataclean": reference_dedup.score(ids, pairs, *dataclean_decisions(outs["dataclean"])),
        "datatrove": reference_dedup.score(ids, pairs, *datatrove_decisions(outs["datatrove"])),
    }
    return {
        "threshold": THRESHOLD,
        "workers": WORKERS,
        "rounds": runs,
        "seconds": {"dataclean": spread(ours), "datatrove": spread(theirs)},
        "ratios": round_ratios(theirs, ours),
        "speedup": spread(round_ratios(theirs, ours)),
        "load_averages": loads,
        "quality": quality,
        "truth": {
            "normalization": reference_dedup.NORMALIZATION,
            "pairs": len(pairs),
            "seconds": round(seconds, 1),
        },
    }


def data_load() -> float:
    return round(os.getloadavg()[0], 1)


def summary(result: dict[str, Any], megabytes: float) -> str:
    """Lines a reader can check: speeds, ratio, memory, quality."""
    ours, theirs = (result["seconds"][tool] for tool in ("dataclean", "datatrove"))
    lines = [
        f"dedup at {result['threshold']}, {result['workers']} workers, cold, "
        f"{len(result['ratios'])} round(s), median (min-max):",
        f"  dataclean {describe([ours['min'], ours['median'], ours['max']], 1, ' s')} "
        f"({megabytes / ours['median']:.1f} MB/s)",
        f"  datatrove {describe([theirs['min'], theirs['median'], theirs['max']], 1, ' s')} "
        f"({megabytes / theirs['median']:.1f} MB/s)",
        f"  dataclean / datatrove speed, per round: {describe(result['ratios'], 2, 'x')}",
    ]
    for tool in ("dataclean", "datatrove"):
        last = result["rounds"][tool][-1]
        found = result["quality"][tool]
        lines.append(
            f"  {tool}: all processes {last['total_mib']:,.0f} MiB; kept {found['kept']:,}, dropped "
            f"{found['dropped']:,}; duplicate pairs left {found['pairs_left']:,} of {found['true_pairs']:,} "
            f"({found['pairs_left_share']:.2%}); dropped with no kept row at J >= {result['threshold']}: "
            f"{found['false_drops']:,} ({found['false_drop_share']:.2%})"
        )
    return "\n".join(lines)


def text_megabytes(corpus: Path) -> float:
    total = 0
    for path in corpus.glob("*.parquet"):
        column = pq.read_table(path, columns=["text"]).column("text")
        total += pc.sum(pc.binary_length(column)).as_py() or 0
    return total / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_dedup"))
    parser.add_argument("--json", type=Path, help="write the results here")
    data.add_data_argument(parser)
    args = parser.parse_args()
    data.use_data(args.data, args.generated)
    corpus = args.work / "corpus"
    build_corpus(corpus, args.docs, args.shards)
    megabytes = text_megabytes(corpus)
    print(f"corpus: {args.docs:,} docs, {megabytes:.0f} MB, {args.shards} shards", flush=True)
    result = compare(corpus, args.work, args.rounds, args.shards)
    result["corpus"] = {"docs": args.docs, "MB": round(megabytes, 1), "shards": args.shards}
    print(summary(result, megabytes))
    (args.json or args.work / "report.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
