"""Every benchmark in one command, and one table: dataclean against the field's tools.

    python benchmarks/run_all.py [--quick] [--docs 100000] [--runs 3] [--data PATH]
                                 [--work /tmp/dataclean-run-all]

Each dataclean figure sits next to a reference measured in the same round on the same input, with
the same warm-up and repetitions (`benchmarks/rounds.py`): figures are medians over rounds, and a
ratio is the median of the per-round ratios with their min-max, never a ratio of two rounds.
Rates are per core: MB (UTF-8 text) / (seconds x cores).

1. Pipelines on bench_dedup's labeled corpus (real sentences from the reference data folder, near
   and exact copies mixed in), each in a fresh process timed from start to exit (both cold), the
   memory of all its processes sampled every 0.5 s (bench_scale.run_measured), `--runs` rounds in
   a rotating order, 2 workers:
   - `dataclean run` with its default recipe (Ray): it does more than the datatrove side (it also
     labels languages, splits long documents, filters by perplexity, applies the quarantine list);
   - `dataclean run --skip pii,quality,split,perplexity_filter,quarantine`: the stages the datatrove side has
     (clean, dedup, perplexity; the language stage keeps the corpus's lang column, as datatrove
     uses it: perplexity needs a producer of `lang`), though the clean stages
     differ in what they do: CleanText repairs the mojibake it detects, strips controls, drops
     empty rows; FTFYFormatter runs ftfy.fix_text on every document;
   - datatrove's equivalent (benchmarks/datatrove_equivalent.py: reader -> FTFYFormatter -> 4-stage
     MinHash dedup -> CCNet perplexity stats -> writer, LocalPipelineExecutor).
   The "pipeline:" rows compare each tool's own per-step seconds in the same round (summed over
   workers; dataclean's dedup includes writing its summaries, as datatrove's stage 1 includes
   writing its signatures). Each pipeline's fixed cost per run follows the table: its wall
   seconds beyond its steps' seconds shared over the 2 workers (benchmarks/startup.py).
2. Dedup alone (bench_dedup.compare): `dataclean run --only dedup` against datatrove's four MinHash
   stages, both cold in fresh processes.
3. Dedup quality of both tools in 1 and 2, against one truth written apart from dataclean
   (benchmarks/reference_dedup.py: exact Jaccard of all pairs of 5-gram shingle sets): duplicate
   pairs left in the output, and rows dropped with no kept row at J >= 0.7.
4. Stage benchmarks, one core, each in its own process with --json: bench_signatures.py (MinHash
   against datasketch and rensa), bench_clean.py, bench_split.py, bench_perplexity.py,
   bench_quality.py (the quality stage against datatrove's four filters); what each
   prints (agreement, repair quality, where the time goes) is kept in WORK/<script>.txt.

Default size: about 30 minutes on 2 shared cores; --quick: a few minutes. Results also go to
WORK/report.json. Benchmark-only dependencies (`pip install -e .[bench]`): datatrove, tokenizers,
tldextract (datatrove rows), rensa (signature rows), pysbd, sentencex, blingfire (split rows); a
row whose library is missing is skipped.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import bench_dedup, reference_dedup  # noqa: E402
from benchmarks import corpus as data  # noqa: E402
from benchmarks.bench_scale import run_config, run_measured  # noqa: E402
from benchmarks.measure import Measurement, comparison  # noqa: E402
from benchmarks.run_all_tables import quality_table, table  # noqa: E402
from benchmarks.startup import fixed_cost  # noqa: E402

WORKERS = 2
THRESHOLD = bench_dedup.THRESHOLD
# The stages the datatrove side has: not pii or quality (no counterpart there; quality's web-page
# rules would also hand dedup a different corpus), nor split, the perplexity cut or quarantine.
SAME_STAGES = ("--skip", "pii,quality,split,perplexity_filter,quarantine")
# The default recipe at equal work: the corpus has a `lang` column, which the language stage keeps
# by default; datatrove's LanguageFilter labels every document, so dataclean's does too.
EQUAL_WORK = ("--set", "language.relabel=true")


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


def dataclean_pipeline(corpus: Path, out: Path, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """`dataclean run` (Ray, 2 workers) in a fresh process; its stats and memory."""
    before = load()
    run = run_config(corpus, out, "ray", WORKERS, extra=extra)
    stats = json.loads((out / "stats.json").read_text())
    total_mib = run["total_mb"] * 1e6 / 2**20
    return {**run, "total_mib": total_mib, "load_before": before, "load_after": load(), "stats": stats}


def datatrove_pipeline(corpus: Path, work: Path, tasks: int, equal_work: bool = False) -> dict[str, Any]:
    """benchmarks/datatrove_equivalent.py in a fresh process; its step seconds and memory.
    `equal_work`: the steps of dataclean's default recipe (its `--equal-work`)."""
    name = "datatrove-equal" if equal_work else "datatrove"
    result = work / f"{name}.json"
    before = load()
    options = ("--equal-work",) if equal_work else ()
    command = bench_dedup.datatrove_command(corpus, work / name, tasks, result, *options)
    seconds, memory = run_measured(command, "datatrove pipeline")
    return {
        **json.loads(result.read_text()),
        "seconds": seconds,
        "total_mib": memory.total / 2**20,
        "driver_mib": memory.driver / 2**20,
        "largest_child_mib": memory.largest_child / 2**20,
        "load_before": before,
        "load_after": load(),
    }


PIPELINES = ("dataclean default", "datatrove equal work", "dataclean same stages", "datatrove")


def run_pipelines(corpus: Path, work: Path, runs: int, tasks: int) -> dict[str, list[dict[str, Any]]]:
    """Each pipeline once per round, `runs` rounds, the order rotated every round."""
    found: dict[str, list[dict[str, Any]]] = {name: [] for name in PIPELINES}
    for number in range(max(1, runs)):
        shift = number % len(PIPELINES)
        for name in PIPELINES[shift:] + PIPELINES[:shift]:
            if name.startswith("datatrove"):
                found[name].append(datatrove_pipeline(corpus, work, tasks, name == "datatrove equal work"))
            elif name == "dataclean default":
                found[name].append(dataclean_pipeline(corpus, work / "dataclean", EQUAL_WORK))
            else:
                found[name].append(dataclean_pipeline(corpus, work / "dataclean-same", SAME_STAGES))
            print(
                f"  round {number + 1}: {name} {found[name][-1]['seconds']:.1f} s (load {load()})", flush=True
            )
    return found


def _text_megabytes(folder: Path) -> float:
    total = 0
    for path in folder.glob("*.parquet"):
        column = pq.read_table(path, columns=["text"]).column("text")
        total += pc.sum(pc.binary_length(column)).as_py() or 0
    return total / 1e6


def _median(values: list[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return statistics.median(known) if known else None


def pipeline_rows(
    note: str, runs: dict[str, list[dict[str, Any]]], docs: int, megabytes: float, theirs_out_mb: float
) -> list[dict[str, Any]]:
    """End to end (wall, both cores) and each tool's own per-stage seconds, round by round."""
    theirs = runs["datatrove"]

    def whole(name: str, label: str) -> Measurement:
        found = runs[name]
        seconds = [run["seconds"] for run in found]
        return Measurement(
            label,
            docs,
            megabytes,
            statistics.median(seconds),
            WORKERS,
            _median([run["total_mib"] for run in found]),
            "all processes",
            seconds,
        )

    reference = whole("datatrove", "datatrove pipeline (2 workers)")
    rows = [
        comparison(
            "default pipeline end to end, equal work",
            f"{note}; clean, pii, language, quality, dedup, perplexity on both sides; dataclean also "
            "splits, filters by perplexity, applies quarantine (a no-op); datatrove's quality filters "
            "in FineWeb's English configuration",
            whole("dataclean default", "dataclean run, default recipe (Ray, 2 workers)"),
            whole(
                "datatrove equal work",
                "datatrove: FTFY, PII, LanguageFilter (lid.176), Gopher x2, C4, FineWeb, MinHash 1-4, "
                "CCNet perplexity (2 workers)",
            ),
        ),
        comparison(
            "same stages end to end",
            f"{note}; clean, dedup, perplexity on both sides (their clean steps differ)",
            whole(
                "dataclean same stages", "dataclean run --skip pii,quality,split,perplexity_filter,quarantine"
            ),
            reference,
        ),
    ]
    ours = runs["dataclean same stages"]
    default, equal = runs["dataclean default"], runs["datatrove equal work"]

    def step(run: dict[str, Any], *needles: str) -> float:
        steps = run["step_seconds"]
        return float(sum(sec for name, sec in steps.items() if any(needle in name for needle in needles)))

    def stage(name: str, label: str, rounds: list[dict[str, Any]] = ours) -> Measurement:
        # A barrier's fit is driver wall time while its tasks may keep every worker busy: counted
        # as all workers busy, an upper bound on its core-seconds.
        per_round = []
        for run in rounds:
            found = next(s for s in run["stats"]["stages"] if s["stage"] == name)
            per_round.append(found["seconds"] + found.get("fit_seconds", 0.0) * (WORKERS - 1))
        found = next(s for s in rounds[-1]["stats"]["stages"] if s["stage"] == name)
        return Measurement(
            label, found["rows_in"], found["bytes_in"] / 1e6, statistics.median(per_round), rounds=per_round
        )

    def theirs_step(
        label: str, docs_in: int, mb_in: float, *needles: str, rounds: list[dict[str, Any]] = theirs
    ) -> Measurement:
        per_round = [step(run, *needles) for run in rounds]
        return Measurement(label, docs_in, mb_in, statistics.median(per_round), rounds=per_round)

    same_round = "same rounds: seconds summed over workers"
    rows += [
        comparison(
            "pipeline: clean",
            same_round,
            stage("clean", "CleanText"),
            theirs_step("FTFYFormatter", docs, megabytes, "FTFY"),
        ),
        comparison(
            "pipeline: dedup",
            same_round,
            stage("dedup", "DropDuplicates (observe + summaries, fit x 2 workers, apply)"),
            theirs_step("MinHash stages 1-4 (with signature files)", docs, megabytes, "MinHash stage"),
        ),
        comparison(
            "pipeline: perplexity",
            same_round,
            stage("perplexity", "ScorePerplexity"),
            theirs_step("CCNet perplexity stats", theirs[-1]["kept"], theirs_out_mb, "perplexity"),
        ),
    ]
    equal_round = "equal-work rounds: seconds summed over workers (inputs differ after the first drops)"
    for name, label, theirs_label, needles in (
        ("pii", "RedactPersonalData", "PIIFormatter", ("PII",)),
        ("language", "IdentifyLanguage", "LanguageFilter (fastText lid.176)", ("Language ID",)),
        ("quality", "FilterQuality", "Gopher x2, C4, FineWeb filters", ("Gopher", "C4 Quality", "FineWeb")),
    ):
        rows.append(
            comparison(
                f"pipeline: {name}",
                equal_round,
                stage(name, label, default),
                theirs_step(theirs_label, docs, megabytes, *needles, rounds=equal),
            )
        )
    return rows


def compare_pipelines(
    corpus: Path, work: Path, runs: int, shards: int, note: str, known: Any
) -> dict[str, Any]:
    """The pipeline rows, both tools' dedup quality (last round) and the runs' details."""
    found = run_pipelines(corpus, work, runs, shards)
    ids, pairs, _ = known
    theirs = found["datatrove"][-1]
    kept, removed = bench_dedup.datatrove_decisions(work / "datatrove")
    theirs["kept"] = len(kept)
    quality = {
        "dataclean": reference_dedup.score(
            ids, pairs, *bench_dedup.dataclean_decisions(work / "dataclean-same")
        ),
        "datatrove": reference_dedup.score(ids, pairs, kept, removed),
    }
    megabytes = _text_megabytes(corpus)
    rows = pipeline_rows(note, found, len(ids), megabytes, _text_megabytes(work / "datatrove" / "out"))
    details = {
        name: [{k: v for k, v in run.items() if k != "stats"} for run in runs_]
        for name, runs_ in found.items()
    }
    return {
        "rows": rows,
        "quality": quality,
        "pipelines": details,
        "fixed": fixed_costs(found),
        "overhead_cpu": overhead_cpu(found),
    }


def fixed_costs(runs: dict[str, list[dict[str, Any]]]) -> dict[str, list[float]]:
    """Per pipeline and round, the wall seconds beyond its steps' own seconds shared over the
    workers (`benchmarks/startup.fixed_cost`): dataclean's stages (fits included) from its
    stats.json, datatrove's steps from its own stats (each process's imports and the executor
    around them are the fixed cost of both)."""
    found: dict[str, list[float]] = {}
    for name, rounds in runs.items():
        if name.startswith("datatrove"):
            found[name] = [run["seconds"] - sum(run["step_seconds"].values()) / WORKERS for run in rounds]
        else:
            found[name] = [fixed_cost(run["seconds"], run["stats"], WORKERS) for run in rounds]
    return found


def overhead_cpu(runs: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, float]]:
    """Per dataclean pipeline, the median over rounds of the CPU seconds its processes spent
    beyond the stages' own batches, by role (bench_scale's sampler, every 0.5 s, so a lower
    bound): Ray's own processes (GCS, raylet, agents), and the driver and Ray's workers together
    less the CPU seconds of the stages' batches (stats.json's `cpu_seconds`; left: imports,
    loading models, Parquet between groups, the barriers' fits, stats, report). CPU against CPU:
    the stages' wall seconds, which this subtracted before, grow with the machine's load while
    their CPU does not, and made it negative on a loaded machine (-110 s at 100,000 documents).
    Over 2 cores, their sum halved is a floor under the fixed cost: seconds no overlap can hide."""
    found: dict[str, dict[str, float]] = {}
    for name, rounds in runs.items():
        if name.startswith("datatrove"):
            continue
        ray = [run["cpu"]["ray"] for run in rounds]
        rest = [
            run["cpu"]["driver"] + run["cpu"]["workers"] - stage_cpu_seconds(run["stats"]) for run in rounds
        ]
        floor = [(a + b) / WORKERS for a, b in zip(ray, rest, strict=True)]
        found[name] = {
            "ray_processes": statistics.median(ray),
            "driver_and_workers": statistics.median(rest),
            "floor": statistics.median(floor),
        }
    return found


def stage_cpu_seconds(stats: dict[str, Any]) -> float:
    """The CPU seconds of every stage's batches (stats.json; its wall seconds where it has none)."""
    return float(sum(stage.get("cpu_seconds", stage["seconds"]) for stage in stats["stages"]))


def dedup_rows(corpus: Path, work: Path, runs: int, shards: int, note: str, known: Any) -> dict[str, Any]:
    """bench_dedup.compare: dedup alone, both tools cold; one row and both tools' quality."""
    result = bench_dedup.compare(corpus, work / "dedup", runs, shards, known)
    ids = known[0]
    megabytes = _text_megabytes(corpus)

    def measured(tool: str, label: str) -> Measurement:
        seconds = [run["seconds"] for run in result["rounds"][tool]]
        memory = _median([run["total_mib"] for run in result["rounds"][tool]])
        return Measurement(
            label, len(ids), megabytes, statistics.median(seconds), WORKERS, memory, "all processes", seconds
        )

    row = comparison(
        "dedup alone, cold, 2 workers",
        f"{note}; threshold 0.7, kept and removed rows written",
        measured("dataclean", "dataclean run --only dedup (Ray)"),
        measured("datatrove", "datatrove MinHash stages 1-4, 14x9 bands"),
    )
    return {"row": row, "quality": result["quality"], "details": result}


# ---------------------------------------------------------------- the stage benchmarks


def stage_benchmarks(work: Path, quick: bool) -> list[dict[str, Any]]:
    """bench_signatures, bench_clean, bench_split, bench_perplexity and bench_quality, each in its
    own process."""
    runs = {
        "bench_signatures.py": [
            *("--rounds", "1" if quick else "5", "--docs", "2000" if quick else "5000"),
            *("--work", str(work)),
        ],
        "bench_clean.py": ["--repeat", "1" if quick else "4", "--rounds", "1" if quick else "5"],
        "bench_split.py": ["--repeat", "1" if quick else "3"],
        "bench_perplexity.py": ["--repeat", "1" if quick else "5"],
        "bench_quality.py": ["--repeat", "1", "--rounds", "1" if quick else "3"],
    }
    rows: list[dict[str, Any]] = []
    for script, options in runs.items():
        result = work / script.replace(".py", ".json")
        command = [sys.executable, str(ROOT / "benchmarks" / script), *options, "--json", str(result)]
        print(f"  {script} {' '.join(options)} (load {load()})", flush=True)
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{script} failed:\n{done.stderr[-3000:]}")
        (work / script.replace(".py", ".txt")).write_text(done.stdout)  # its own report, same run
        rows += json.loads(result.read_text())["rows"]
    return rows


# ---------------------------------------------------------------- the table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run of a few minutes")
    parser.add_argument("--docs", type=int, help="labeled corpus documents (default 100,000; --quick 5,000)")
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--runs", type=int, help="rounds of each pipeline comparison (default 3; --quick 1)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/dataclean-run-all"))
    parser.add_argument("--skip-stages", action="store_true", help="only the pipelines and dedup")
    data.add_data_argument(parser)
    args = parser.parse_args()
    data.use_data(args.data, args.generated)
    docs = args.docs or (5000 if args.quick else 100_000)
    runs = args.runs or (1 if args.quick else 3)
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    source = "generated text (--generated)" if args.generated else str(data.SHARED)
    command = " ".join(["python", "benchmarks/run_all.py", *sys.argv[1:]])
    report: dict[str, Any] = {
        "date": datetime.now().strftime("%Y-%m-%d %H:%M"),
        "command": command,
        "machine": machine(),
        "data": source,
        "load_start": os.getloadavg(),
    }
    print(f"{report['date']}; {report['machine']}; load {load()}; data: {source}", flush=True)

    corpus = work / "corpus"
    bench_dedup.build_corpus(corpus, docs, args.shards)
    note = f"{docs:,} docs, {_text_megabytes(corpus):.0f} MB (bench_dedup's labeled corpus)"
    print(f"corpus: {note}, {args.shards} shards", flush=True)
    report.update(rows=[], quality={})
    if importlib.util.find_spec("datatrove") is None:
        print("no datatrove comparison: datatrove is not installed (pip install -e .[bench])")
    else:
        print("truth: exact Jaccard of all pairs (reference_dedup) ...", flush=True)
        known = bench_dedup.truth(corpus)
        print(f"  {len(known[1]):,} pairs at J >= {THRESHOLD} in {known[2]:.0f} s", flush=True)
        print(f"pipelines, {runs} round(s) ...", flush=True)
        pipelines = compare_pipelines(corpus, work, runs, args.shards, note, known)
        report["rows"] += pipelines["rows"]
        report["quality"]["same-stages pipelines"] = pipelines["quality"]
        report["pipelines"] = pipelines["pipelines"]
        report["fixed_cost"] = pipelines["fixed"]
        report["overhead_cpu"] = pipelines["overhead_cpu"]
        print(f"dedup alone, {runs} round(s) ...", flush=True)
        dedup = dedup_rows(corpus, work, runs, args.shards, note, known)
        report["rows"].append(dedup["row"])
        report["quality"]["dedup alone"] = dedup["quality"]
        report["dedup"] = dedup["details"]
    if not args.skip_stages:
        print("stage benchmarks ...", flush=True)
        report["rows"] += stage_benchmarks(work, args.quick)

    report["load_end"] = os.getloadavg()
    report["seconds"] = round(time.perf_counter() - started)
    (work / "report.json").write_text(json.dumps(report, indent=1, ensure_ascii=False))
    print()
    print(f"{report['date']}, `{command}`, {report['machine']}, data {source}")
    print(table(report["rows"]))
    print()
    if report["quality"]:
        print(quality_table(report["quality"]))
        print()
    for name, found in report.get("pipelines", {}).items():
        print(f"{name}: wall seconds per round {[round(run['seconds'], 1) for run in found]}")
    for name, fixed in report.get("fixed_cost", {}).items():
        print(
            f"{name}: fixed cost per run (wall - stage seconds / {WORKERS} workers), median "
            f"{statistics.median(fixed):.1f} s, per round {[round(value, 1) for value in fixed]}"
        )
    for name, cpu in report.get("overhead_cpu", {}).items():
        print(
            f"{name}: CPU seconds beyond the stages, median: Ray's own processes {cpu['ray_processes']:.1f}, "
            f"driver and workers {cpu['driver_and_workers']:.1f}; over {WORKERS} cores a floor of "
            f"{cpu['floor']:.1f} s under the fixed cost"
        )
    print(
        f"{report['seconds']} s in all; 1-minute load average {report['load_start'][0]:.1f} at the start, "
        f"{report['load_end'][0]:.1f} at the end"
    )
    print(f"details: {work / 'report.json'}")


if __name__ == "__main__":
    main()
