"""The default pipeline at scale: a size curve, and 1 -> 2 workers against the machine's ceiling.

    python benchmarks/bench_scale.py [--sizes 100000,300000,1000000,3000000] [--speedup-docs 1000000]
                                     [--rounds 3] [--data PATH] [--work /tmp/dataclean-scale]
                                     [--overhead] [--cluster]

Corpora (built once per size, cached): short documents of 1-4 real sentences (English from
Gutenberg, Chinese from CMRC 2018: the reference data folder, `--data`), 8% exact and 8% near
copies mixed in, 16 Parquet shards. Every run is `dataclean run` with the default recipe in a
fresh process, timed from launch to exit; memory and CPU time of the driver and of every Ray
worker are sampled every 0.5 s.

1. Size curve: the default pipeline (embedded Ray, 2 workers) at each size of `--sizes`: wall
   seconds, docs/s, driver and largest-worker peak memory, and the growth exponent (the slope of
   log seconds against log documents, over all sizes and between neighbours: 1.0 is linear).
2. 1 -> 2 workers at `--speedup-docs`, `--rounds` rounds. A round runs 1 worker, then 2 workers,
   then measures the machine's own ceiling on the speed-up (`bench_contention.ceiling_round`: the
   row-local stages over two shards in one process, then in two at once, no Ray). Each round's
   speed-up is divided by that same round's ceiling: the efficiency (target >= 0.9). Runs of
   different rounds are never paired; figures are the median with min-max over rounds.
   `--overhead` adds the local executor at 1 worker to each round (Ray's overhead against it);
   `--cluster` adds 1 and 2 workers on a Ray head started once by the benchmark (`--address`).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import random
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import corpus as data
from benchmarks.rounds import spread

ROOT = Path(__file__).resolve().parent.parent


def _sentences() -> list[str]:
    if not data.have_shared():
        return [s for doc in data.generated_docs(4000) for s in doc.split(". ") if s]
    english: list[str] = []
    for path in sorted((data.SHARED / "en" / "gutenberg").glob("*.txt")):
        for line in path.read_text(encoding="utf-8", errors="ignore").splitlines():
            line = re.sub(r" ([,.;:!?'])", r"\1", line).strip()
            if 40 <= len(line) <= 400:
                english.append(line)
    chinese: list[str] = []
    for line in (data.SHARED / "zh" / "cmrc2018" / "cmrc2018_contexts_dedup.txt").read_text().splitlines():
        chinese.extend(s + "。" for s in line.split("。") if 15 <= len(s) <= 200)
    return english + chinese


def build_corpus(folder: Path, docs: int, shards: int, seed: int = 7) -> None:
    """Write `docs` documents into `shards` Parquet files: 1-4 sentences each, 8% exact copies,
    8% near copies (one word/character changed), the rest unique."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    marker = folder / "DONE"
    if marker.exists() and json.loads(marker.read_text()) == {"docs": docs, "shards": shards}:
        return
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    sentences = _sentences()
    per_shard = docs // shards
    made: list[str] = []
    for shard in range(shards):
        texts, ids = [], []
        for row in range(per_shard if shard < shards - 1 else docs - per_shard * (shards - 1)):
            roll = rng.random()
            if made and roll < 0.08:
                text = rng.choice(made)
            elif made and roll < 0.16:
                words = rng.choice(made).split(" ")
                if len(words) > 6:
                    words[rng.randrange(len(words))] = "changed"
                text = " ".join(words)
            else:
                text = " ".join(rng.choice(sentences) for _ in range(rng.randint(1, 4)))
                if len(made) < 200_000:
                    made.append(text)
            texts.append(text)
            ids.append(f"s{shard:03d}-{row:07d}")
        pq.write_table(pa.table({"id": ids, "text": texts}), folder / f"part-{shard:03d}.parquet")
    marker.write_text(json.dumps({"docs": docs, "shards": shards}))


def _is_ray_worker(cmdline: str) -> bool:
    """A Ray worker process (named `ray::IDLE` or `ray::<task>` once started), not one of Ray's agents."""
    name = cmdline.split(" ", 1)[0]
    return (name.startswith("ray::") and not name.endswith("Agent")) or "default_worker.py" in cmdline


class _MemorySampler(threading.Thread):
    """Samples the resident memory of a process tree: the driver and every other process."""

    def __init__(self, pid: int, cluster: bool = False) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.cluster = cluster  # the workers belong to a running Ray cluster, not to this process
        self.driver = 0
        self.worker = 0
        # The same peaks without file pages (resident size less `shared`: RssFile + RssShmem),
        # what the process itself holds: a file it maps (dedup's spilled sets) is the system's
        # file cache, which it takes back when memory runs short.
        self.driver_anon = 0
        self.worker_anon = 0
        self.largest_child = 0
        self.total = 0
        self.stop = threading.Event()
        # Last CPU seconds (user + system) seen per process, by role: what each part of the run
        # cost, including processes that exited before the end.
        self.cpu: dict[int, tuple[str, float]] = {}

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds by role: `driver`, `workers` (Ray workers) and `ray` (Ray's own processes)."""
        totals = {"driver": 0.0, "workers": 0.0, "ray": 0.0}
        for role, seconds in self.cpu.values():
            totals[role] += seconds
        return totals

    def _note_cpu(self, process: Any, role: str) -> None:
        times = process.cpu_times()
        self.cpu[process.pid] = (role, times.user + times.system)

    def run(self) -> None:
        import psutil

        root = psutil.Process(self.pid)
        while not self.stop.is_set():
            try:
                driver_memory = root.memory_info()
                driver = driver_memory.rss
                self.driver_anon = max(self.driver_anon, driver - driver_memory.shared)
                others = []
                children = root.children(recursive=True)
                if self.cluster:
                    children += [p for p in psutil.process_iter() if p.name().startswith("ray::")]
                self._note_cpu(root, "driver")
                for child in children:
                    with contextlib.suppress(psutil.Error):
                        command = " ".join(child.cmdline())
                        memory = child.memory_info()
                        others.append((memory.rss, command))
                        if _is_ray_worker(command):
                            self.worker_anon = max(self.worker_anon, memory.rss - memory.shared)
                        self._note_cpu(child, "workers" if _is_ray_worker(command) else "ray")
                workers = [rss for rss, cmd in others if _is_ray_worker(cmd)]
                self.driver = max(self.driver, driver)
                self.worker = max([self.worker, *workers])
                self.largest_child = max([self.largest_child, *(rss for rss, _ in others)])
                self.total = max(self.total, driver + sum(rss for rss, _ in others))
            except psutil.Error:
                pass
            self.stop.wait(0.5)


def run_measured(command: list[str], label: str, cluster: bool = False) -> tuple[float, _MemorySampler]:
    """Run `command` from the repository root; its wall seconds and its process tree's memory
    (and, with `cluster`, that of the running Ray cluster's workers)."""
    env = {**os.environ, "RAY_DATA_LOG_LEVEL": "ERROR"}
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    sampler = _MemorySampler(process.pid, cluster)
    sampler.start()
    _, stderr = process.communicate()
    seconds = time.perf_counter() - started
    sampler.stop.set()
    if process.returncode != 0:
        raise SystemExit(f"{label} failed:\n{stderr.decode()[-3000:]}")
    return seconds, sampler


def dataclean_command(corpus: Path, out: Path, *options: str) -> list[str]:
    """`dataclean run CORPUS -o OUT --overwrite --quiet OPTIONS` in this Python, as a command."""
    return [
        sys.executable,
        "-m",
        "dataclean",
        "run",
        str(corpus),
        "-o",
        str(out),
        "--overwrite",
        "--quiet",
        *options,
    ]


def run_config(
    corpus: Path,
    out: Path,
    executor: str,
    workers: int,
    address: str | None = None,
    extra: tuple[str, ...] = (),
) -> dict[str, Any]:
    """One default-pipeline run in a fresh process; returns seconds, rows and memory peaks.

    With `address` the run joins that Ray cluster instead of starting an embedded one; `extra`
    options go to `dataclean run` as they are (e.g. `--skip split`)."""
    command = dataclean_command(
        corpus,
        out,
        "--executor",
        executor,
        "--workers",
        str(workers),
        *(["--address", address] if address else []),
        *extra,
    )
    seconds, sampler = run_measured(command, f"{executor}/{workers}", cluster=address is not None)
    stats = json.loads((out / "stats.json").read_text())
    return {
        "executor": f"{executor} (cluster)" if address else executor,
        "workers": workers,
        "seconds": seconds,
        # run_pipeline's own wall time: without the process's imports, ray.init and report.html
        "pipeline_seconds": stats["seconds"]["wall"],
        "rows_in": stats["totals"]["rows_in"],
        "kept": stats["totals"]["kept"],
        "driver_mb": sampler.driver / 1e6,
        "worker_mb": sampler.worker / 1e6,
        "driver_anon_mb": sampler.driver_anon / 1e6,
        "worker_anon_mb": sampler.worker_anon / 1e6,
        "total_mb": sampler.total / 1e6,
        "stages": {s["stage"]: round(s["seconds"], 1) for s in stats["stages"]},
        "cpu": sampler.cpu_seconds(),
    }


@contextlib.contextmanager
def ray_cluster(cpus: int) -> Iterator[str]:
    """A Ray head started for the benchmark (`ray start --head`), stopped afterwards; its address."""
    ray = str(Path(sys.executable).with_name("ray"))
    with socket.socket() as probe:  # a free port for its GCS
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = subprocess.run(
        [ray, "start", "--head", f"--port={port}", f"--num-cpus={cpus}", "--include-dashboard=false"],
        capture_output=True,
        text=True,
        env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"},
    )
    found = re.search(r"--address='([^']+)'", started.stdout + started.stderr)
    if started.returncode != 0 or not found:
        raise SystemExit(f"ray start failed:\n{started.stdout[-2000:]}{started.stderr[-2000:]}")
    try:
        yield found.group(1)
    finally:
        subprocess.run([ray, "stop"], capture_output=True)


def growth(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of log(value) against log(docs): 1.0 is linear growth."""
    xs = [math.log(docs) for docs, _ in points]
    ys = [math.log(value) for _, value in points]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread_x = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread_x


def corpus_for(work: Path, docs: int, shards: int) -> Path:
    folder = work / f"corpus-{docs}"
    started = time.perf_counter()
    build_corpus(folder, docs, shards)
    size = sum(p.stat().st_size for p in folder.glob("*.parquet")) / 1e6
    print(
        f"corpus: {docs:,} documents, {shards} shards, {size:.0f} MB Parquet "
        f"(built/checked in {time.perf_counter() - started:.0f} s)",
        flush=True,
    )
    return folder


def _row(result: dict[str, Any]) -> str:
    return (
        f"{result['rows_in']:>10,} {result['seconds']:8.1f} {result['rows_in'] / result['seconds']:9,.0f} "
        f"{result['driver_mb']:9,.0f} {result['worker_mb']:9,.0f} {result['total_mb']:8,.0f}"
    )


def size_curve(work: Path, sizes: list[int], shards: int) -> dict[str, Any]:
    """The default pipeline (embedded Ray, 2 workers) at each size; the growth exponents."""
    runs = []
    print(f"{'docs':>10} {'seconds':>8} {'docs/s':>9} {'driver MB':>9} {'worker MB':>9} {'all MB':>8}")
    for docs in sizes:
        corpus = corpus_for(work, docs, shards)
        result = run_config(corpus, work / "out-curve", "ray", 2)
        result["load"] = os.getloadavg()[0]
        runs.append(result)
        print(_row(result) + f"   (load {result['load']:.1f})", flush=True)
    points = [(r["rows_in"], r["seconds"]) for r in runs]
    exponents = {"seconds, all sizes": growth(points)}
    for (small, t_small), (large, t_large) in itertools.pairwise(points):
        exponents[f"seconds, {small:,} -> {large:,}"] = math.log(t_large / t_small) / math.log(large / small)
    exponents["driver MB, all sizes"] = growth([(r["rows_in"], r["driver_mb"]) for r in runs])
    exponents["worker MB, all sizes"] = growth([(r["rows_in"], r["worker_mb"]) for r in runs])
    for name, value in exponents.items():
        print(f"growth exponent, {name}: {value:.2f}")
    return {"runs": runs, "exponents": exponents}


def speedup_rounds(
    work: Path, docs: int, shards: int, rounds: int, overhead: bool, cluster: bool
) -> dict[str, Any]:
    """1 and 2 workers and the machine's ceiling, round by round; never paired across rounds."""
    from benchmarks.bench_contention import ceiling_round

    corpus = corpus_for(work, docs, shards)
    first, second = (str(path) for path in sorted(corpus.glob("*.parquet"))[:2])
    configs: list[tuple[str, int, bool]] = [("ray", 1, False), ("ray", 2, False)]
    if overhead:
        configs.insert(0, ("local", 1, False))
    if cluster:
        configs += [("ray", 1, True), ("ray", 2, True)]
    found: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        address = stack.enter_context(ray_cluster(cpus=2)) if cluster else None
        for number in range(max(1, rounds)):
            results: dict[str, dict[str, Any]] = {}
            for executor, workers, on_cluster in configs:
                name = f"{executor}{'-cluster' if on_cluster else ''}-{workers}"
                results[name] = run_config(
                    corpus, work / f"out-{name}", executor, workers, address if on_cluster else None
                )
            alone, together = ceiling_round(first, second)
            entry: dict[str, Any] = {
                "load": os.getloadavg()[0],
                "seconds": {name: r["seconds"] for name, r in results.items()},
                "kept": sorted({r["kept"] for r in results.values()}),
                "ceiling": alone / together,
                "speedup": results["ray-1"]["seconds"] / results["ray-2"]["seconds"],
                "speedup_inside": results["ray-1"]["pipeline_seconds"] / results["ray-2"]["pipeline_seconds"],
                "memory": {
                    name: {k: r[k] for k in ("driver_mb", "worker_mb", "total_mb")}
                    for name, r in results.items()
                },
                "cpu": {name: r["cpu"] for name, r in results.items()},
            }
            entry["efficiency"] = entry["speedup"] / entry["ceiling"]
            if cluster:
                entry["speedup_cluster"] = (
                    results["ray-cluster-1"]["seconds"] / results["ray-cluster-2"]["seconds"]
                )
            if overhead:
                entry["ray_overhead"] = results["ray-1"]["seconds"] / results["local-1"]["seconds"] - 1
            found.append(entry)
            times = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in entry["seconds"].items())
            print(
                f"round {number + 1}: {times}; speed-up {entry['speedup']:.2f}x (inside run_pipeline "
                f"{entry['speedup_inside']:.2f}x), ceiling {entry['ceiling']:.2f}x, efficiency "
                f"{entry['efficiency']:.2f} (load {entry['load']:.1f})",
                flush=True,
            )
    keys = ["speedup", "speedup_inside", "ceiling", "efficiency"]
    keys += ["speedup_cluster"] if cluster else []
    keys += ["ray_overhead"] if overhead else []
    summary = {key: spread([entry[key] for entry in found]) for key in keys}
    for key, value in summary.items():
        print(
            f"median over {len(found)} round(s), {key}: {value['median']:.2f} "
            f"({value['min']:.2f}-{value['max']:.2f})"
        )
    print("efficiency = speed-up / the same round's ceiling; target >= 0.9")
    same = all(len(entry["kept"]) == 1 for entry in found)
    print(f"same kept rows in every configuration of a round: {same}")
    return {"docs": docs, "rounds": found, "summary": summary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", default="100000,300000,1000000,3000000", help="comma-separated; '' to skip"
    )
    parser.add_argument(
        "--speedup-docs", type=int, default=1_000_000, help="0 to skip the 1 -> 2 workers rounds"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--work", type=Path, default=Path("/tmp/dataclean-scale"))
    parser.add_argument("--overhead", action="store_true", help="also the local executor at 1 worker")
    parser.add_argument("--cluster", action="store_true", help="also 1 and 2 workers on a running Ray head")
    parser.add_argument("--json", type=Path, help="write the results here")
    data.add_data_argument(parser)
    args = parser.parse_args()
    data.use_data(args.data, args.generated)
    sizes = [int(size) for size in args.sizes.split(",") if size.strip()]
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "command": " ".join(["python", "benchmarks/bench_scale.py", *sys.argv[1:]]),
        "load_start": os.getloadavg(),
    }
    print(f"{report['date']}: {report['command']} (load {report['load_start'][0]:.1f})", flush=True)
    if sizes:
        report["curve"] = size_curve(args.work, sizes, args.shards)
    if args.speedup_docs:
        report["speedup"] = speedup_rounds(
            args.work, args.speedup_docs, args.shards, args.rounds, args.overhead, args.cluster
        )
    report["load_end"] = os.getloadavg()
    print(f"load average at the end {report['load_end'][0]:.1f}")
    (args.json or args.work / "scale.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
