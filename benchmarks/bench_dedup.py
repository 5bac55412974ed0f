"""Dedup benchmark: a labeled corpus from real text, signature speed, precision/recall, Ray timing.

    python benchmarks/bench_dedup.py [--docs 100000] [--shards 16] [--work /tmp/bench_dedup]

1. Corpus: originals are random runs of real sentences (English: Gutenberg, WikiText-2, Common
   Crawl; Chinese: CMRC 2018, Hongloumeng; from $DATACLEAN_SHARED_DATA, see corpus.py), plus
   near copies (1-20% of words or characters substituted, deleted or inserted) and exact copies
   (case, spacing and punctuation changed). Written as Parquet shards.
2. Signatures on one core, from raw text: ours (normalize + shingle + hash + 128 permutations,
   whole batches) next to datasketch's per-document `MinHash(hashfunc=xxh32)` +
   `update_batch` on the same shingles, pre-built (its best case).
3. The whole dedup on Ray with 2 workers (observe per shard -> fit -> apply and write kept and
   excluded rows), at thresholds 0.7 and 0.8: wall time, peak memory per task and driver.
4. Precision: share of (dropped, kept) pairs whose true Jaccard >= threshold. Recall: share of
   pairs with true Jaccard >= threshold that end up in one cluster; "resolved" recall: share of
   those pairs of which at least one row is dropped (no duplicate pair left in the output; a
   row that resembles a dropped row but not its kept row is kept). True Jaccard is computed
   exactly (64-bit hashes of the reference shingle strings) on every pair within a family,
   every candidate of a looser LSH (32 bands x 4 rows) and 20k random pairs.
5. datatrove's four-stage MinHash dedup with a whitespace tokenizer on the same shards and 2
   workers, if datatrove is installed (a benchmark-only dependency: `pip install datatrove`).
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

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import xxhash

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.corpus import SHARED, generated_docs, have_shared
from benchmarks.datatrove_equivalent import SplitTokenizer, xxh64_text
from benchmarks.measure import PeakMemory
from dataclean import columns as C
from dataclean.dedup.minhash import band_keys, signatures
from dataclean.dedup.partition import peak_memory_bytes
from dataclean.dedup.shingles import CHARACTERS, Normalized, shingles
from dataclean.stage import FitContext
from dataclean.stages.dedup import DropDuplicates

DATA = SHARED
EDIT_RATES = (0.01, 0.02, 0.03, 0.05, 0.08, 0.12, 0.2)


# ---------------------------------------------------------------- corpus


def _detokenize(line: str) -> str:
    line = line.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".")
    line = re.sub(r" ([,.;:!?)'])", r"\1", line)
    return line.replace(" n't", "n't").replace("( ", "(")


def sentence_pools() -> dict[str, list[str]]:
    if not have_shared():  # generated stand-in text (benchmarks.corpus), split into sentences
        docs = generated_docs(4000)
        words = [s for doc in docs if doc.isascii() for s in doc.split(" of ") if len(s.split()) >= 4]
        han = [doc[i : i + 40] for doc in docs if not doc.isascii() for i in range(0, len(doc), 40)]
        return {"en": words, "zh": [s for s in han if len(s) >= 8]}
    english: list[str] = []
    for path in sorted((DATA / "en" / "gutenberg").glob("*.txt")):
        english += [_detokenize(s.strip()) for s in path.read_text(encoding="utf-8").splitlines()]
    for name in ("valid.txt", "test.txt"):
        for line in (DATA / "en" / "wikitext2" / name).read_text(encoding="utf-8").splitlines():
            if not line.strip().startswith("="):
                english += [_detokenize(s) + " ." for s in line.split(" . ")]
    for path in sorted((DATA / "web").glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for line in handle:
                english += [s.strip() for s in json.loads(line)["text"].splitlines()]
    chinese: list[str] = []
    for path in [
        *(DATA / "zh" / "cmrc2018").glob("*.txt"),
        *(DATA / "zh" / "hongloumeng").glob("*.txt"),
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


# ---------------------------------------------------------------- signature throughput


def signature_speed(texts: list[str], langs: list[str]) -> dict[str, Any]:
    from datasketch import MinHash

    sizes = sum(len(text.encode()) for text in texts) / 1e6
    modes = [CHARACTERS if lang == "zh" else 0 for lang in langs]
    prepared = [shingles(text, 5, mode) for text, mode in zip(texts, modes, strict=True)]
    with PeakMemory() as theirs_memory:
        started = time.perf_counter()
        kept = []  # the signatures are kept, as ours are
        for row_shingles in prepared:
            minhash = MinHash(num_perm=128, seed=1, hashfunc=xxhash.xxh32_intdigest)
            minhash.update_batch(row_shingles)
            kept.append(minhash.hashvalues)
        theirs = time.perf_counter() - started
    del kept
    array = pa.array(texts)
    lang_array = pa.array(langs)
    best = float("inf")
    with PeakMemory() as ours_memory:
        for _ in range(3):
            started = time.perf_counter()
            normalized = Normalized(array)
            signatures(normalized.data, normalized.offsets, normalized.modes(lang_array), 5, 128, 1)
            best = min(best, time.perf_counter() - started)
    return {
        "datasketch_seconds": theirs,
        "ours_seconds": best,
        "datasketch_peak_MB": theirs_memory.megabytes,
        "ours_peak_MB": ours_memory.megabytes,
        "docs": len(texts),
        "MB": round(sizes, 1),
        "datasketch_docs_per_s": round(len(texts) / theirs),
        "datasketch_MB_per_s": round(sizes / theirs, 1),
        "ours_docs_per_s": round(len(texts) / best),
        "ours_MB_per_s": round(sizes / best, 1),
        "speedup": round(theirs / best, 1),
    }


# ---------------------------------------------------------------- dedup on Ray


class RayExecutor:
    """Plain Ray tasks; results are handed to on_result as they finish."""

    def __init__(self, workers: int) -> None:
        import ray

        self.ray = ray
        self.workers = workers
        self.task = ray.remote(num_cpus=1)(_call)

    def map(self, fn: Any, items: Any, on_result: Any = None, light: bool = False) -> list[Any]:
        function = self.ray.put(fn)
        pending = {self.task.remote(function, item): index for index, item in enumerate(items)}
        results: list[Any] = [None] * len(pending)
        while pending:
            done, _ = self.ray.wait(list(pending), num_returns=1)
            index = pending.pop(done[0])
            results[index] = self.ray.get(done[0])
            if on_result is not None:
                on_result(index, results[index])
        return results


def _call(function: Any, item: Any) -> Any:
    return function(item)


def _peak() -> int:
    return peak_memory_bytes()


def _idle_worker(_: int) -> int:
    """Peak memory of a worker that has imported the stage and done nothing (the baseline)."""
    import dataclean.stages.dedup  # noqa: F401

    return _peak()


class Observe:
    def __init__(self, stage: DropDuplicates, folder: str) -> None:
        self.stage, self.folder = stage, folder

    def __call__(self, shard: str) -> tuple[str, int]:
        path = os.path.join(self.folder, Path(shard).name)
        source = pq.ParquetFile(shard)
        with pq.ParquetWriter(path, self.stage.observe(source.schema_arrow.empty_table()).schema) as out:
            for batch in source.iter_batches(batch_size=8192):
                out.write_table(self.stage.observe(pa.Table.from_batches([batch])))
        return path, _peak()


class Apply:
    def __init__(self, stage: DropDuplicates, folder: str) -> None:
        self.stage, self.folder = stage, folder

    def __call__(self, shard: str) -> tuple[int, int, int]:
        table = self.stage(pq.read_table(shard))
        dropped = pa.compute.is_valid(table.column(C.DROP_REASON))
        kept = table.filter(pa.compute.invert(dropped)).drop_columns([C.DROP_REASON])
        excluded = table.filter(dropped)
        pq.write_table(kept, os.path.join(self.folder, "data", Path(shard).name))
        pq.write_table(excluded, os.path.join(self.folder, "excluded", Path(shard).name))
        return kept.num_rows, excluded.num_rows, _peak()


def dedup_on_ray(shards: list[str], work: Path, threshold: float, executor: Any) -> dict[str, Any]:
    out = work / f"out-{threshold}"
    shutil.rmtree(out, ignore_errors=True)
    for sub in ("summaries", "data", "excluded", "scratch"):
        (out / sub).mkdir(parents=True)
    stage = DropDuplicates(threshold=threshold)
    times = {}
    started = time.perf_counter()
    observed = executor.map(Observe(stage, str(out / "summaries")), shards)
    times["observe"] = time.perf_counter() - started
    mark = time.perf_counter()
    stage.fit(FitContext([path for path, _ in observed], str(out / "scratch"), executor))
    times["fit"] = time.perf_counter() - mark
    mark = time.perf_counter()
    applied = executor.map(Apply(stage, str(out)), shards)
    times["apply"] = time.perf_counter() - mark
    times["total"] = time.perf_counter() - started
    return {
        "threshold": threshold,
        "bands_rows": [stage.sketch().bands, stage.sketch().rows],
        "seconds": {key: round(value, 2) for key, value in times.items()},
        "fit_seconds": stage.fit_stats["seconds"],
        "kept": sum(k for k, _, _ in applied),
        "dropped": sum(d for _, d, _ in applied),
        "peak_task_MB": round(
            max(
                [p for _, p in observed] + [p for _, _, p in applied] + [stage.fit_stats["peak_worker_bytes"]]
            )
            / 2**20
        ),
        "peak_driver_MB": round(_peak() / 2**20),
        "fit_stats": {k: v for k, v in stage.fit_stats.items() if k != "seconds"},
        "output": str(out),
    }


# ---------------------------------------------------------------- precision / recall


def ids_of(table: pa.Table) -> list[str]:
    return table.column(C.ID).to_pylist()


class TrueJaccard:
    """Exact Jaccard over 64-bit hashes of the reference shingle strings, cached per document."""

    def __init__(self, texts: dict[str, str], langs: dict[str, str]) -> None:
        self.texts, self.langs, self.cache = texts, langs, {}

    def sets(self, doc: str) -> np.ndarray:
        if doc not in self.cache:
            mode = CHARACTERS if self.langs[doc] == "zh" else 0
            hashed = [xxhash.xxh3_64_intdigest(s) for s in shingles(self.texts[doc], 5, mode)]
            self.cache[doc] = np.unique(np.array(hashed, dtype=np.uint64))
        return self.cache[doc]

    def __call__(self, a: str, b: str) -> float:
        first, second = self.sets(a), self.sets(b)
        if len(first) == 0 and len(second) == 0:
            return 1.0
        common = len(np.intersect1d(first, second, assume_unique=True))
        return common / (len(first) + len(second) - common)


def evaluation_pairs(corpus: pa.Table, labels: pa.Table, rng: random.Random) -> set[tuple[str, str]]:
    """Family pairs, loose-LSH candidates and random pairs, as (smaller id, larger id)."""
    pairs: set[tuple[str, str]] = set()
    by_family: dict[int, list[str]] = {}
    for doc, family in zip(ids_of(labels), labels.column("family").to_pylist(), strict=True):
        by_family.setdefault(family, []).append(doc)
    for members in by_family.values():
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                pairs.add((min(a, b), max(a, b)))
    ids = corpus.column(C.ID).to_pylist()
    normalized = Normalized(corpus.column(C.TEXT))
    modes = normalized.modes(corpus.column(C.LANG))
    sig, _, _ = signatures(normalized.data, normalized.offsets, modes, 5, 128, 1)
    keys = band_keys(sig, 32, 4)
    for band in range(32):
        order = np.argsort(keys[:, band], kind="stable")
        sorted_keys = keys[order, band]
        starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
        ends = np.r_[starts[1:], len(order)]
        for start, end in zip(starts, ends, strict=True):
            if end - start > 1:
                members = sorted(ids[i] for i in order[start:end])
                for i, a in enumerate(members[:50]):
                    for b in members[i + 1 : 50]:
                        pairs.add((a, b))
    for _ in range(20000):
        a, b = rng.sample(ids, 2)
        pairs.add((min(a, b), max(a, b)))
    return pairs


def precision_recall(
    output: str,
    pairs: set[tuple[str, str]],
    truth: TrueJaccard,
    jaccards: dict[tuple[str, str], float],
    threshold: float,
) -> dict[str, Any]:
    cluster: dict[str, str] = {}
    claims = []
    for folder in ("data", "excluded"):
        table = pq.read_table(os.path.join(output, folder), columns=[C.ID, C.DUP_CLUSTER])
        for doc, kept in zip(
            table.column(C.ID).to_pylist(), table.column(C.DUP_CLUSTER).to_pylist(), strict=True
        ):
            if kept is not None:
                cluster[doc] = kept
                if folder == "excluded":
                    claims.append((min(doc, kept), max(doc, kept)))
    for pair in claims:
        if pair not in jaccards:
            jaccards[pair] = truth(*pair)
    correct = sum(1 for pair in claims if jaccards[pair] >= threshold)
    true_pairs = [pair for pair in pairs if jaccards[pair] >= threshold]
    found = [p for p in true_pairs if p[0] in cluster and cluster.get(p[0]) == cluster.get(p[1])]
    dropped = {doc for doc, kept in cluster.items() if doc != kept}
    resolved = [p for p in true_pairs if p[0] in dropped or p[1] in dropped]
    bins = {}
    for low, high in ((threshold, 0.8), (0.8, 0.9), (0.9, 1.01)):
        inside = [p for p in true_pairs if low <= jaccards[p] < high]
        hit = [p for p in inside if p[0] in cluster and cluster.get(p[0]) == cluster.get(p[1])]
        if inside:
            bins[f"[{low:.1f},{min(high, 1.0):.1f})"] = round(len(hit) / len(inside), 4)
    return {
        "claims": len(claims),
        "precision": round(correct / max(len(claims), 1), 4),
        "true_pairs": len(true_pairs),
        "recall": round(len(found) / max(len(true_pairs), 1), 4),
        "recall_resolved": round(len(resolved) / max(len(true_pairs), 1), 4),
        "recall_by_jaccard": bins,
    }


# ---------------------------------------------------------------- datatrove


def datatrove_dedup(shards_folder: Path, work: Path, tasks: int) -> dict[str, Any]:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup import (
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.pipeline.readers import ParquetReader
    from datatrove.pipeline.writers import ParquetWriter

    base = work / "datatrove"
    shutil.rmtree(base, ignore_errors=True)
    config = MinhashConfig()
    tokenizer = SplitTokenizer()

    def reader() -> Any:
        return ParquetReader(str(shards_folder), glob_pattern="*.parquet", id_key=C.ID, text_key=C.TEXT)

    signer = MinhashDedupSignature(str(base / "sigs"), config=config, language=tokenizer)
    signer._hash_func = xxh64_text
    stages = [
        ([reader(), signer], tasks),
        (
            [MinhashDedupBuckets(str(base / "sigs"), str(base / "buckets"), config=config)],
            config.num_buckets,
        ),
        ([MinhashDedupCluster(str(base / "buckets"), str(base / "remove"), config=config)], 1),
        (
            [reader(), MinhashDedupFilter(str(base / "remove")), ParquetWriter(str(base / "out"))],
            tasks,
        ),
    ]
    times = []
    started = time.perf_counter()
    for number, (pipeline, count) in enumerate(stages):
        mark = time.perf_counter()
        LocalPipelineExecutor(
            pipeline=pipeline,
            tasks=count,
            workers=2,
            logging_dir=str(base / f"logs{number}"),
            skip_completed=False,
        ).run()
        times.append(round(time.perf_counter() - mark, 2))
    total = time.perf_counter() - started
    kept = sum(pq.ParquetFile(p).metadata.num_rows for p in (base / "out").rglob("*.parquet"))
    return {"seconds": round(total, 2), "stage_seconds": times, "kept": kept}


# ---------------------------------------------------------------- main


def ray_session(
    shards: list[str], work: str, thresholds: list[float], result_path: str, project: bool = False
) -> None:
    """In a fresh process: start Ray, dedup at each threshold, save timings and peak memory.

    `project`: map with `dataclean.executors.ray.RayExecutor` (Ray Data actor pools, what
    `dataclean run` uses) instead of this file's plain Ray tasks.
    """
    import ray

    report: dict[str, Any] = {}
    mark = time.perf_counter()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    report["ray_init_seconds"] = round(time.perf_counter() - mark, 2)
    executor: Any = RayExecutor(workers=2)
    if project:
        from dataclean.executors.ray import RayExecutor as ProjectExecutor

        executor = ProjectExecutor(workers=2)
    report["idle_worker_MB"] = round(max(executor.map(_idle_worker, [0, 1])) / 2**20)
    report["runs"] = [dedup_on_ray(shards, Path(work), t, executor) for t in thresholds]
    ray.shutdown()
    report["driver_peak_MB"] = round(_peak() / 2**20)
    Path(result_path).write_text(json.dumps(report))


def run_fresh(
    shards: list[str], work: Path, thresholds: list[float], project: bool = False
) -> dict[str, Any]:
    """`ray_session` in a new Python process (this script again, so Ray pickles its classes)."""
    import subprocess

    result = work / "ray_session.json"
    request = {
        "shards": shards,
        "work": str(work),
        "thresholds": thresholds,
        "result": str(result),
        "project": project,
    }
    subprocess.run(
        [sys.executable, __file__, "--session", json.dumps(request)],
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    return dict(json.loads(result.read_text()))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--work", default="/tmp/bench_dedup")
    parser.add_argument("--skip-datatrove", action="store_true")
    parser.add_argument("--scaling", action="store_true", help="also dedup half the shards")
    parser.add_argument(
        "--project-executor", action="store_true", help="also time dataclean.executors.ray (Ray Data)"
    )
    parser.add_argument("--speed-docs", type=int, default=5000)
    parser.add_argument("--session", help=argparse.SUPPRESS)  # internal: see run_fresh
    args = parser.parse_args()
    if args.session:
        request = json.loads(args.session)
        ray_session(
            request["shards"], request["work"], request["thresholds"], request["result"], request["project"]
        )
        return
    work = Path(args.work)
    shards_folder = work / "corpus"
    report: dict[str, Any] = {"docs": args.docs, "shards": args.shards}

    started = time.perf_counter()
    build_corpus(shards_folder, args.docs, args.shards)
    shards = sorted(str(p) for p in shards_folder.glob("*.parquet"))
    report["corpus_seconds"] = round(time.perf_counter() - started, 1)

    # The dedup first, in a fresh process, so its driver memory is its own.
    session = run_fresh(shards, work, [0.7, 0.8])
    if args.scaling:
        (work / "half").mkdir(exist_ok=True)
        half = run_fresh(shards[: len(shards) // 2], work / "half", [0.7])
        report["half_corpus"] = {
            "shards": len(shards) // 2,
            "seconds": half["runs"][0]["seconds"],
            "peak_task_MB": half["runs"][0]["peak_task_MB"],
            "driver_peak_MB": half["driver_peak_MB"],
        }

    if args.project_executor:
        (work / "project").mkdir(exist_ok=True)
        project = run_fresh(shards, work / "project", [0.7], project=True)
        report["project_executor"] = {
            "seconds": project["runs"][0]["seconds"],
            "fit_seconds": project["runs"][0]["fit_seconds"],
            "ray_init_seconds": project["ray_init_seconds"],
        }

    labels = pq.read_table(work / "labels.parquet")
    corpus = pa.concat_tables(pq.read_table(p) for p in shards)
    megabytes = sum(len(t.encode()) for t in corpus.column(C.TEXT).to_pylist()) / 1e6
    kinds = labels.group_by("kind").aggregate([("id", "count")]).to_pylist()
    report["corpus"] = {"MB": round(megabytes, 1), "kinds": kinds}

    sample = corpus.slice(0, args.speed_docs)
    report["signatures_one_core"] = signature_speed(
        sample.column(C.TEXT).to_pylist(), sample.column(C.LANG).to_pylist()
    )

    report["ray_init_seconds"] = session["ray_init_seconds"]
    report["idle_worker_MB"] = session["idle_worker_MB"]
    report["driver_peak_MB"] = session["driver_peak_MB"]
    runs = session["runs"]
    for run in runs:
        run["MB_per_s"] = round(megabytes / run["seconds"]["total"], 1)
        total = run["seconds"]["total"] + report["ray_init_seconds"]
        run["MB_per_s_with_ray_init"] = round(megabytes / total, 1)
    report["dedup_on_ray_2_workers"] = runs

    rng = random.Random(1)
    pairs = evaluation_pairs(corpus, labels, rng)
    ids = corpus.column(C.ID).to_pylist()
    texts = dict(zip(ids, corpus.column(C.TEXT).to_pylist(), strict=True))
    langs = dict(zip(ids, corpus.column(C.LANG).to_pylist(), strict=True))
    truth = TrueJaccard(texts, langs)
    jaccards = {pair: truth(*pair) for pair in pairs}
    report["evaluated_pairs"] = len(pairs)
    for run in runs:
        run["quality"] = precision_recall(run["output"], pairs, truth, jaccards, run["threshold"])

    if not args.skip_datatrove:
        try:
            theirs = datatrove_dedup(shards_folder, work, args.shards)
            theirs["MB_per_s"] = round(megabytes / theirs["seconds"], 1)
            report["datatrove_2_workers"] = theirs
            ours = runs[0]["seconds"]["total"] + report["ray_init_seconds"]
            report["speedup_vs_datatrove_including_ray_init"] = round(theirs["seconds"] / ours, 1)
        except ImportError as error:
            report["datatrove_2_workers"] = f"not available: {error}"
    print(json.dumps(report, indent=1))
    (work / "report.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
