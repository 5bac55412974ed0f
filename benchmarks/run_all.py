"""Every benchmark in one command, and one table: dataclean against the field's tools.

    python benchmarks/run_all.py [--quick] [--docs 100000] [--work /tmp/dataclean-run-all]

Each dataclean figure sits next to a reference measured in the same run on the same input, since
absolute speeds drift on a shared machine: the ratios are the headline. Rates are per core:
MB (UTF-8 text) / (seconds x cores).

1. The default pipeline end to end on bench_dedup's labeled corpus (real sentences from
   ../shared/data, or generated text without it; near and exact copies mixed in): `dataclean run`
   (Ray, 2 workers) against datatrove's equivalent pipeline (benchmarks/datatrove_equivalent.py:
   reader -> FTFYFormatter -> 4-stage MinHash dedup -> CCNet perplexity stats -> writer,
   LocalPipelineExecutor, 2 workers), each in a fresh process timed from start to exit, the
   memory of all its processes sampled every 0.5 s (bench_scale.run_measured). Both tools' stage
   rows come from their own per-step timings of that run (seconds summed over workers). Their
   dedup decisions are scored with bench_dedup's precision/recall against exact Jaccard.
2. Stage benchmarks, one core: bench_clean.py (CleanText against ftfy.fix_text on every document
   and datatrove's FTFYFormatter), bench_split.py (sentence splitting against pysbd and other
   PyPI splitters), bench_perplexity.py (against KenLM alone and datatrove's CCNet stats), each
   run with --json in its own process; and dedup signatures (bench_dedup.signature_speed: ours
   against datasketch's per-document MinHash loop) on the labeled corpus. Peak memory there is
   what the implementation needed above its input (benchmarks/measure.py).

Default size: about 15 minutes on 2 shared cores; --quick: about 2 minutes. Results also go to
WORK/report.json. Benchmark-only dependencies: datatrove, tokenizers, tldextract (datatrove rows),
pysbd, sentencex, blingfire (split rows); each row is skipped when its library is missing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import random
import subprocess
import sys
import time
from datetime import date
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import bench_dedup  # noqa: E402
from benchmarks.bench_scale import run_config, run_measured  # noqa: E402
from benchmarks.corpus import SHARED, have_shared  # noqa: E402
from benchmarks.datatrove_equivalent import decisions  # noqa: E402
from benchmarks.measure import Measurement, comparison  # noqa: E402
from dataclean import columns as C  # noqa: E402

WORKERS = 2
THRESHOLD = 0.7  # dataclean's default near-duplicate threshold: the pairs that count as duplicates


def machine() -> str:
    memory = next(
        line for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")
    )
    gigabytes = int(memory.split()[1]) / 2**20
    python = platform.python_version()
    return f"{os.cpu_count()} cores, {gigabytes:.0f} GB, {platform.machine()}, Python {python}"


def load() -> float:
    return round(os.getloadavg()[0], 1)


# ---------------------------------------------------------------- the pipelines


def dataclean_pipeline(corpus: Path, work: Path) -> dict[str, Any]:
    """`dataclean run` (default recipe, Ray, 2 workers) in a fresh process; stats and memory."""
    out = work / "dataclean"
    before = load()
    run = run_config(corpus, out, "ray", WORKERS)
    stats = json.loads((out / "stats.json").read_text())
    total_mib = run["total_mb"] * 1e6 / 2**20
    return {**run, "total_mib": total_mib, "load_before": before, "load_after": load(), "stats": stats}


def datatrove_pipeline(corpus: Path, work: Path, tasks: int) -> dict[str, Any]:
    """benchmarks/datatrove_equivalent.py in a fresh process; its step seconds and memory."""
    result = work / "datatrove.json"
    command = [
        sys.executable,
        str(ROOT / "benchmarks" / "datatrove_equivalent.py"),
        str(corpus),
        str(work / "datatrove"),
        "--tasks",
        str(tasks),
        "--workers",
        str(WORKERS),
        "--json",
        str(result),
    ]
    before = load()
    seconds, memory = run_measured(command, "datatrove pipeline")
    return {
        **json.loads(result.read_text()),
        "wall_seconds": seconds,
        "total_mib": memory.total / 2**20,
        "driver_mib": memory.driver / 2**20,
        "largest_child_mib": memory.largest_child / 2**20,
        "load_before": before,
        "load_after": load(),
    }


def dataclean_decisions(out: Path, folder: Path) -> None:
    """dataclean's output as bench_dedup.precision_recall reads it: one row per input document
    (`parent_id`), in `excluded/` when dedup dropped it, in `data/` otherwise."""
    columns = [C.PARENT_ID, C.DUP_CLUSTER]
    kept = pq.read_table(out / "data", columns=columns)
    if any((out / "excluded").glob("*.parquet")):
        excluded = pq.read_table(out / "excluded", columns=[*columns, C.STAGE])
    else:
        excluded = kept.slice(0, 0).append_column(C.STAGE, pa.array([], pa.string()))
    by_dedup = pc.equal(excluded.column(C.STAGE), "dedup")
    other = excluded.filter(pc.invert(by_dedup)).select(columns)
    for sub, table in (("data", pa.concat_tables([kept, other])), ("excluded", excluded.filter(by_dedup))):
        (folder / sub).mkdir(parents=True, exist_ok=True)
        rows = table.group_by(columns).aggregate([]).rename_columns([C.ID, C.DUP_CLUSTER])
        pq.write_table(rows, folder / sub / "decisions.parquet")


def dedup_quality(corpus: Path, outputs: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """bench_dedup's precision/recall of each tool's decisions at the same threshold."""
    shards = sorted(corpus.glob("*.parquet"))
    table = pa.concat_tables(pq.read_table(path) for path in shards)
    labels = pq.read_table(corpus.parent / "labels.parquet")
    pairs = bench_dedup.evaluation_pairs(table, labels, random.Random(1))
    ids = table.column(C.ID).to_pylist()
    truth = bench_dedup.TrueJaccard(
        dict(zip(ids, table.column(C.TEXT).to_pylist(), strict=True)),
        dict(zip(ids, table.column(C.LANG).to_pylist(), strict=True)),
    )
    jaccards = {pair: truth(*pair) for pair in pairs}
    return {
        tool: bench_dedup.precision_recall(str(folder), pairs, truth, jaccards, THRESHOLD)
        for tool, folder in outputs.items()
    }


def pipeline_rows(
    corpus_note: str, ours: dict[str, Any], theirs: dict[str, Any], theirs_out_mb: float
) -> list[dict[str, Any]]:
    """End to end (wall, both cores) and each tool's own per-stage seconds for the same run."""
    stats = ours["stats"]
    stages = {stage["stage"]: stage for stage in stats["stages"]}
    docs, megabytes = stats["totals"]["rows_in"], stats["totals"]["bytes_in"] / 1e6
    end_to_end = comparison(
        "default pipeline end to end",
        corpus_note,
        Measurement(
            "dataclean run (Ray, 2 workers)",
            docs,
            megabytes,
            ours["seconds"],
            WORKERS,
            ours["total_mib"],
            "all processes",
        ),
        Measurement(
            "datatrove pipeline (2 workers)",
            docs,
            megabytes,
            theirs["wall_seconds"],
            WORKERS,
            theirs["total_mib"],
            "all processes",
        ),
    )
    steps = theirs["step_seconds"]

    def step(*needles: str) -> float:
        return float(
            sum(seconds for name, seconds in steps.items() if any(needle in name for needle in needles))
        )

    def stage(name: str, label: str) -> Measurement:
        # A barrier's fit is driver wall time while its tasks may keep every worker busy: counted
        # as all workers busy, an upper bound on its core-seconds.
        found = stages[name]
        seconds = found["seconds"] + found.get("fit_seconds", 0.0) * (WORKERS - 1)
        return Measurement(label, found["rows_in"], found["bytes_in"] / 1e6, seconds)

    rows = [
        comparison(
            "pipeline: clean",
            "same run: seconds summed over workers",
            stage("clean", "CleanText"),
            Measurement("FTFYFormatter", docs, megabytes, step("FTFY")),
        ),
        comparison(
            "pipeline: dedup",
            "same run: seconds summed over workers",
            stage("dedup", "DropDuplicates (observe, fit x 2 workers, apply)"),
            Measurement("MinHash stages 1-4", docs, megabytes, step("MinHash stage")),
        ),
        comparison(
            "pipeline: perplexity",
            "same run: seconds summed over workers",
            stage("perplexity", "ScorePerplexity (after split)"),
            Measurement("CCNet perplexity stats", theirs["kept"], theirs_out_mb, step("perplexity")),
        ),
    ]
    return [end_to_end, *rows]


# ---------------------------------------------------------------- the stage benchmarks


def stage_benchmarks(work: Path, quick: bool) -> list[dict[str, Any]]:
    """bench_clean, bench_split and bench_perplexity, each in its own process with --json."""
    runs = {
        "bench_clean.py": ["--repeat", "1" if quick else "4"],
        "bench_split.py": ["--repeat", "1" if quick else "3"],
        "bench_perplexity.py": ["--repeat", "1" if quick else "5"],
    }
    rows: list[dict[str, Any]] = []
    for script, options in runs.items():
        result = work / script.replace(".py", ".json")
        command = [sys.executable, str(ROOT / "benchmarks" / script), *options, "--json", str(result)]
        print(f"  {script} {' '.join(options)}", flush=True)
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{script} failed:\n{done.stderr[-3000:]}")
        rows += json.loads(result.read_text())["rows"]
    return rows


def signature_rows(corpus: Path, docs: int) -> list[dict[str, Any]]:
    """bench_dedup's signature speed: ours from raw text against datasketch's per-document loop."""
    table = pa.concat_tables(pq.read_table(path) for path in sorted(corpus.glob("*.parquet"))).slice(0, docs)
    speed = bench_dedup.signature_speed(table.column(C.TEXT).to_pylist(), table.column(C.LANG).to_pylist())
    docs = int(speed["docs"])
    note = f"{docs:,} docs, {speed['MB']} MB of the labeled corpus"
    return [
        comparison(
            "dedup signatures",
            note,
            Measurement(
                "MinHash from raw text, 128 permutations",
                docs,
                speed["MB"],
                speed["ours_seconds"],
                peak_mb=speed["ours_peak_MB"],
            ),
            Measurement(
                "datasketch per-document MinHash (xxh32, shingles pre-built)",
                docs,
                speed["MB"],
                speed["datasketch_seconds"],
                peak_mb=speed["datasketch_peak_MB"],
            ),
        )
    ]


# ---------------------------------------------------------------- the table


def _number(value: float, digits: int = 3) -> str:
    if value >= 10 ** (digits - 1):
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def _memory(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


HEADER = (
    "step",
    "input",
    "dataclean",
    "MB/s/core",
    "docs/s/core",
    "peak MB",
    "reference",
    "MB/s/core",
    "docs/s/core",
    "peak MB",
    "dataclean / reference",
)


def _ratio(value: float) -> str:
    return f"**{value:.0f}x**" if value >= 20 else f"**{value:.1f}x**" if value >= 2 else f"**{value:.2f}x**"


def table(rows: list[dict[str, Any]], quality: dict[str, dict[str, Any]]) -> str:
    """The markdown table: one row per comparison (speed per core), then the pipelines' dedup
    quality on the same run (precision: dropped rows within the threshold of the row their
    cluster kept; recall: duplicate pairs that end in one cluster)."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for row in rows:
        ours, theirs = Measurement(**row["dataclean"]), Measurement(**row["reference"])
        cells = [row["step"], row["corpus"]]
        for measured in (ours, theirs):
            cells += [
                measured.implementation,
                _number(measured.mb_per_core_second),
                _number(measured.docs_per_core_second),
                _memory(measured.peak_mb),
            ]
        lines.append("| " + " | ".join([*cells, _ratio(row["ratio"])]) + " |")
    if quality:
        ours_found, theirs_found = quality["dataclean"], quality["datatrove"]
        cells = [
            f"dedup quality, Jaccard >= {THRESHOLD}",
            f"{ours_found['true_pairs']:,} true pairs, same run",
        ]
        for tool, found in (("dataclean", ours_found), ("datatrove", theirs_found)):
            cells += [tool, f"precision {found['precision']:.3f}", f"recall {found['recall']:.3f}", ""]
        lines.append("| " + " | ".join([*cells, ""]) + " |")
    return "\n".join(lines)


def run_pipelines(corpus: Path, work: Path, runs: int, tasks: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each tool `runs` times, interleaved (dataclean, datatrove, datatrove, dataclean, ...) so
    that both see the same load on average; each tool's fastest run (wall seconds) is kept."""
    ours: list[dict[str, Any]] = []
    theirs: list[dict[str, Any]] = []
    for number in range(runs):
        order = ("dataclean", "datatrove") if number % 2 == 0 else ("datatrove", "dataclean")
        for tool in order:
            if tool == "dataclean":
                ours.append(dataclean_pipeline(corpus, work))
                found = f"{ours[-1]['seconds']:.1f} s"
            else:
                theirs.append(datatrove_pipeline(corpus, work, tasks))
                found = f"{theirs[-1]['wall_seconds']:.1f} s"
            print(f"  {tool} run {number + 1}: {found} (load {load()})", flush=True)
    best_ours = min(ours, key=lambda run: run["seconds"])
    best_theirs = min(theirs, key=lambda run: run["wall_seconds"])
    best_ours["all_runs_seconds"] = [round(run["seconds"], 1) for run in ours]
    best_theirs["all_runs_seconds"] = [round(run["wall_seconds"], 1) for run in theirs]
    return best_ours, best_theirs


def _text_megabytes(folder: Path) -> float:
    total = 0
    for path in folder.glob("*.parquet"):
        column = pq.read_table(path, columns=[C.TEXT]).column(C.TEXT)
        total += pc.sum(pc.binary_length(column)).as_py() or 0
    return total / 1e6


def compare_pipelines(corpus: Path, work: Path, runs: int, shards: int, note: str) -> dict[str, Any]:
    """The pipeline rows, the dedup quality of both tools and the runs' details."""
    ours, theirs = run_pipelines(corpus, work, runs, shards)
    decided = {tool: work / "decisions" / tool for tool in ("dataclean", "datatrove")}
    dataclean_decisions(work / "dataclean", decided["dataclean"])
    theirs.update(decisions(work / "datatrove", decided["datatrove"]))
    print("dedup precision/recall ...", flush=True)
    return {
        "rows": pipeline_rows(note, ours, theirs, _text_megabytes(work / "datatrove" / "out")),
        "quality": dedup_quality(corpus, decided),
        "pipelines": {"dataclean": {k: v for k, v in ours.items() if k != "stats"}, "datatrove": theirs},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run of about 2 minutes")
    parser.add_argument("--docs", type=int, help="labeled corpus documents (default 100,000; --quick 5,000)")
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--runs", type=int, help="pipeline runs per tool, interleaved (default 2; --quick 1)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/dataclean-run-all"))
    parser.add_argument("--skip-stages", action="store_true", help="only the pipelines")
    args = parser.parse_args()
    docs = args.docs or (5000 if args.quick else 100_000)
    runs = args.runs or (1 if args.quick else 2)
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    source = str(SHARED) if have_shared() else "generated text (no ../shared/data)"
    report: dict[str, Any] = {"date": str(date.today()), "machine": machine(), "data": source}
    print(f"{report['date']}; {report['machine']}; load {load()}; data: {source}", flush=True)

    corpus = work / "corpus"
    bench_dedup.build_corpus(corpus, docs, args.shards)
    note = f"{docs:,} docs, {_text_megabytes(corpus):.0f} MB: bench_dedup's labeled corpus"
    print(f"corpus: {note}, {args.shards} shards", flush=True)
    report.update(rows=[], quality={})
    if importlib.util.find_spec("datatrove") is None:
        print(
            "no pipeline comparison: datatrove is not installed (pip install datatrove tokenizers tldextract)"
        )
    else:
        print(f"pipelines, {runs} run(s) each ...", flush=True)
        report.update(compare_pipelines(corpus, work, runs, args.shards, note))
    if not args.skip_stages:
        print("stage benchmarks ...", flush=True)
        report["rows"] += signature_rows(corpus, 2000 if args.quick else 5000)
        report["rows"] += stage_benchmarks(work, args.quick)

    (work / "report.json").write_text(json.dumps(report, indent=1, ensure_ascii=False))
    print()
    print(table(report["rows"], report["quality"]))
    print()
    if "pipelines" in report:
        seconds = {tool: run["all_runs_seconds"] for tool, run in report["pipelines"].items()}
        print(f"pipeline runs (wall seconds): {seconds}")
    print(f"{time.perf_counter() - started:.0f} s in all, 1-minute load average {load()} at the end")
    print(f"details: {work / 'report.json'}")


if __name__ == "__main__":
    main()
