"""Dedup on pages that share a site template against plain pages of the same size, in one run.

    python benchmarks/bench_dedup_template.py [--docs 12000 100000] [--rounds 1]
                                              [--executor local] [--work /tmp/bench_dedup_template]

Two corpora per size, from one generated vocabulary (`vocabulary`: 20,000 made-up words drawn
with Zipf frequencies, so words repeat as in real text but 5-grams rarely do):
- template: every page is one 350-word site template (200 words before, 150 after) around 150
  words of its own. Two such pages have a word 5-gram Jaccard of about 0.5: under the 0.7
  threshold, but their MinHash signatures collide in many LSH bands, so the candidate graph is
  one giant component (the case issue 37 measured at 46 s against 3.5 s for 6,000 pages);
- plain: every page is 500 words of its own.
In both, 5% of the pages get a planted near copy (2% of all its words replaced), so each corpus has
true duplicates to find. Each round runs `dataclean run CORPUS -o OUT --only dedup --executor
EXECUTOR` on both corpora in a fresh process (rotating order, `benchmarks/rounds.py`); the ratio
is template / plain within a round. The planted copies found and the rows dropped that are not
planted copies are reported (both corpora are built so nothing else is within the threshold: the
template pages are at about 0.5 of each other).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_scale import dataclean_command, run_measured
from benchmarks.rounds import describe, round_ratios, spread

TEMPLATE_HEAD, TEMPLATE_TAIL, OWN_WORDS = 200, 150, 150
PLAIN_WORDS = TEMPLATE_HEAD + TEMPLATE_TAIL + OWN_WORDS
COPY_SHARE = 0.05
COPY_EDIT_RATE = 0.02


def vocabulary(size: int = 20_000, seed: int = 3) -> list[str]:
    """Made-up lowercase words of 2-9 letters, distinct."""
    rng = random.Random(seed)
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))))
    return sorted(words)


def _drawer(words: list[str], seed: int) -> tuple[np.random.Generator, np.ndarray]:
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, len(words) + 1, dtype=np.float64)
    weights = 1.0 / ranks
    return rng, weights / weights.sum()


def build_pair(folder: Path, docs: int, shards: int = 8, seed: int = 11) -> dict[str, Path]:
    """Write the template and plain corpora (`docs` pages each) and their planted copies' ids."""
    words = vocabulary()
    array = np.array(words, dtype=object)
    rng, weights = _drawer(words, seed)
    template = array[rng.choice(len(words), TEMPLATE_HEAD + TEMPLATE_TAIL, p=weights)]
    head, tail = " ".join(template[:TEMPLATE_HEAD]), " ".join(template[TEMPLATE_HEAD:])
    paths = {}
    for kind in ("template", "plain"):
        own = OWN_WORDS if kind == "template" else PLAIN_WORDS
        draws = array[rng.choice(len(words), (docs, own), p=weights)]
        copies = int(docs * COPY_SHARE)
        originals = docs - copies
        texts = []
        for row in range(originals):
            body = " ".join(draws[row])
            texts.append(f"{head} {body} {tail}" if kind == "template" else body)
        pick = random.Random(seed + docs)
        planted = []
        for number in range(copies):
            source = pick.randrange(originals)
            tokens = texts[source].split()
            for _ in range(round(len(tokens) * COPY_EDIT_RATE)):
                tokens[pick.randrange(len(tokens))] = pick.choice(words)
            texts.append(" ".join(tokens))
            planted.append((f"p{originals + number:07d}", f"p{source:07d}"))
        ids = [f"p{row:07d}" for row in range(docs)]
        order = list(range(docs))
        random.Random(seed).shuffle(order)  # copies are not all in the last shard
        table = pa.table({"id": [ids[i] for i in order], "text": [texts[i] for i in order]})
        corpus = folder / kind
        shutil.rmtree(corpus, ignore_errors=True)
        corpus.mkdir(parents=True)
        for shard in range(shards):
            lo, hi = docs * shard // shards, docs * (shard + 1) // shards
            pq.write_table(table.slice(lo, hi - lo), corpus / f"shard-{shard:04d}.parquet")
        (folder / f"{kind}-planted.json").write_text(json.dumps(planted))
        paths[kind] = corpus
    return paths


def dropped(out: Path) -> dict[str, str]:
    """id -> reason of every row dedup dropped."""
    found: dict[str, str] = {}
    for path in sorted((out / "excluded").glob("*.parquet")):
        table = pq.read_table(path, columns=["id", "stage", "reason"]).to_pylist()
        found.update({row["id"]: row["reason"] for row in table if row["stage"] == "dedup"})
    return found


def score(out: Path, planted_path: Path) -> dict[str, int]:
    """Planted copies found (the copy or its original dropped: the pair is not both kept), and
    drops that name a kept row outside the dropped row's family (wrong: by construction no
    other pair is within the threshold)."""
    planted = dict(json.loads(planted_path.read_text()))
    drops = dropped(out)
    found = sum(1 for copy, original in planted.items() if copy in drops or original in drops)
    family = {row: planted.get(row, row) for row in drops}
    kept = {row: reason.rsplit(":", 1)[1] for row, reason in drops.items()}  # dedup:<kind>:<id>
    wrong = sum(1 for row in drops if planted.get(kept[row], kept[row]) != family[row])
    return {"planted": len(planted), "found": found, "wrong_drops": wrong}


def run_size(work: Path, docs: int, rounds: int, executor: str) -> dict[str, Any]:
    paths = build_pair(work / f"corpus-{docs}", docs)
    seconds: dict[str, list[float]] = {"template": [], "plain": []}
    memory: dict[str, float] = {}
    fit_seconds: dict[str, list[float]] = {"template": [], "plain": []}  # the barrier's fit alone
    for number in range(max(1, rounds)):
        order = ["template", "plain"] if number % 2 == 0 else ["plain", "template"]
        for kind in order:
            out = work / f"out-{docs}-{kind}"
            command = dataclean_command(paths[kind], out, "--only", "dedup", "--executor", executor)
            elapsed, sampler = run_measured(command, f"dedup {kind}")
            seconds[kind].append(elapsed)
            memory[kind] = sampler.total / 2**20
            stats = json.loads((out / "stats.json").read_text())
            stage = next(found for found in stats["stages"] if found["stage"] == "dedup")
            fit_seconds[kind].append(stage.get("fit_seconds", 0.0))
            print(f"  {docs:,} docs, round {number + 1}: {kind} {elapsed:.1f} s", flush=True)
    planted = {kind: work / f"corpus-{docs}" / f"{kind}-planted.json" for kind in seconds}
    quality = {kind: score(work / f"out-{docs}-{kind}", planted[kind]) for kind in seconds}
    return {
        "docs": docs,
        "seconds": {kind: spread(values) for kind, values in seconds.items()},
        # template seconds / plain seconds, per round (round_ratios divides its first by its second)
        "ratios": round_ratios(seconds["template"], seconds["plain"]),
        "fit_seconds": fit_seconds,
        "total_mib": memory,
        "quality": quality,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, nargs="+", default=[12_000, 100_000])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--executor", default="local")
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_dedup_template"))
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    results = [run_size(args.work, docs, args.rounds, args.executor) for docs in args.docs]
    for result in results:
        template, plain = (result["seconds"][kind]["median"] for kind in ("template", "plain"))
        found = result["quality"]
        print(
            f"{result['docs']:,} docs ({args.executor}): template {template:.1f} s, plain {plain:.1f} s, "
            f"template / plain per round {describe(result['ratios'], 2, 'x')}; planted copies found "
            f"{found['template']['found']}/{found['template']['planted']} (template), "
            f"{found['plain']['found']}/{found['plain']['planted']} (plain); wrong drops "
            f"{found['template']['wrong_drops']} / {found['plain']['wrong_drops']}; fit seconds "
            f"{result['fit_seconds']['template']} / {result['fit_seconds']['plain']}"
        )
    (args.json or args.work / "report.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
