"""Where a `dataclean run`'s seconds go, from its own progress lines: a helper of the benchmarks.

`timed_progress(command, env)` runs the command with its stderr piped (so `dataclean run` prints
its plain, timestamped progress lines: `dataclean.cli.progress`), and returns its wall seconds
(start to exit, timed here), the seconds until its first progress line arrived here, and each
line with the time it arrived. `fixed_cost(wall, stats, workers)` is the wall time not spent in
the stages: wall minus the stages' seconds (every task's, and each barrier's fit) divided by the
workers, that is every second a perfectly shared run would not have had (start, checks, Ray,
imbalance, stats, report, shutdown). `phases(lines, wall)` cuts the run at its progress lines
into: start (to the first line: interpreter, imports), loading stages, checks (to the first
group), stages (first group to the stats), finish (stats, report, Ray's shutdown, exit).

Benchmark-only: never imported by tests.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
_STAMP = re.compile(r"^\[ *(\d+\.\d)s\] (.*)$")


def timed_progress(command: list[str], env: dict[str, str], cwd: Path = ROOT) -> dict[str, Any]:
    """Run `command`; {"wall", "first_line", "lines": [(seconds after start, text)], "stderr"}."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    lines: list[tuple[float, str]] = []
    rest: list[str] = []

    def read() -> None:
        assert process.stderr is not None
        for raw in process.stderr:
            text = raw.decode(errors="replace").rstrip("\n")
            arrived = time.perf_counter() - started
            match = _STAMP.match(text)
            if match:
                lines.append((arrived, match.group(2)))
            else:
                rest.append(text)

    reader = threading.Thread(target=read)
    reader.start()
    process.wait()
    wall = time.perf_counter() - started
    reader.join()
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n" + "\n".join(rest[-30:]))
    return {"wall": wall, "first_line": lines[0][0] if lines else None, "lines": lines, "stderr": rest}


def stage_seconds(stats: dict[str, Any]) -> float:
    """Every stage's seconds over all tasks, its fit included (stats.json's per-stage seconds)."""
    return float(sum(stage["seconds"] for stage in stats["stages"]))


def fixed_cost(wall: float, stats: dict[str, Any], workers: int) -> float:
    """Wall seconds beyond the stages' own time shared over `workers` (module docstring)."""
    return wall - stage_seconds(stats) / workers


def phases(lines: list[tuple[float, str]], wall: float) -> dict[str, float]:
    """Seconds of each phase of a run (module docstring), from its progress lines: a group's
    first line is its label alone ("clean..dedup", no space), the steps are phrases."""
    if not lines:
        return {}

    def first(test: Any, default: float) -> float:
        return next((seconds for seconds, text in lines if test(text)), default)

    loading = first(lambda text: text == "loading stages", lines[0][0])
    inputs = first(lambda text: " input file" in text, loading)
    grouped = first(lambda text: " " not in text, inputs)
    finishing = first(lambda text: text == "writing stats", wall)
    return {
        "start": lines[0][0],
        "loading stages": inputs - loading,
        "to the first group": grouped - inputs,
        "stages": finishing - grouped,
        "finish": wall - finishing,
    }
