"""An embedded Ray on a shared machine: a driver killed with -9 takes its Ray with it, runs go on
beside other Rays, and a Ray that fails is one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from dataclean.errors import ExecutorError
from dataclean.executors import ray_watchdog
from tests.conftest import ROOT, message_lines, read_rows, write_jsonl

psutil = pytest.importorskip("psutil")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _run_command(source: Path, out: Path) -> list[str]:
    """`dataclean run` on the default executor (an embedded Ray), the clean stage only."""
    return [sys.executable, "-m", "dataclean", "run", str(source), "-o", str(out), "--only", "clean"]


def _alive(processes: list[Any]) -> list[Any]:
    alive = []
    for process in processes:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
        except psutil.NoSuchProcess:
            pass
    return alive


def _gone_within(processes: list[Any], seconds: float) -> list[Any]:
    deadline = time.monotonic() + seconds
    while _alive(processes) and time.monotonic() < deadline:
        time.sleep(0.2)
    return _alive(processes)


def test_watchdog_kills_a_dead_drivers_children_and_spares_a_closed_one(tmp_path: Path) -> None:
    """Without Ray: a driver that starts two `sleep` children and the watchdog, then is killed
    with -9 (its children are gone within 10 s); one that says `done` first leaves them be."""
    script = textwrap.dedent(
        """
        import os, subprocess, sys, time
        from dataclean.executors import ray_watchdog
        children = [subprocess.Popen(["sleep", "120"]) for _ in range(2)]
        watchdog = ray_watchdog.start(os.getpid())
        time.sleep(1.5)  # the watchdog notes the children
        if sys.argv[1] == "close":
            ray_watchdog.stop(watchdog)
        print(" ".join(str(child.pid) for child in children), flush=True)
        time.sleep(120)
        """
    )
    for mode in ("kill", "close"):
        driver = subprocess.Popen(
            [sys.executable, "-c", script, mode], env=_env(), stdout=subprocess.PIPE, text=True
        )
        assert driver.stdout is not None
        children = [psutil.Process(int(pid)) for pid in driver.stdout.readline().split()]
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        left = _gone_within(children, 10)
        if mode == "kill":
            assert left == []
        else:
            assert len(left) == 2
            for child in left:
                child.kill()


SLOW_RECIPE = """
import time
from typing import ClassVar
from dataclean.stage import Stage

class Slow(Stage):
    name: ClassVar[str] = "slow"

    def __call__(self, table):
        time.sleep(0.5)  # a run that lasts until its Ray is up, whoever runs its shards
        return table

STAGES = [Slow()]
"""


def _slow_recipe(folder: Path) -> Path:
    recipe = folder / "slow.py"
    recipe.write_text(SLOW_RECIPE)
    return recipe


def _killed_when(tmp_path: Path, up: str) -> list[Any]:
    """Start `dataclean run` on the default executor, kill it with -9 once a process named `up`
    runs under it, and return what ran under it then and is still there 10 s later."""
    source = tmp_path / "in"
    source.mkdir()
    for shard in range(40):
        write_jsonl(source / f"{shard}.jsonl", [{"text": f"Document {shard} with some words."}])
    driver = subprocess.Popen(
        [*_run_command(source, tmp_path / "out")[:-2], "--pipeline", str(_slow_recipe(tmp_path))],
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 180
    processes: list[Any] = []
    while time.monotonic() < deadline and driver.poll() is None:
        processes = psutil.Process(driver.pid).children(recursive=True)
        if any(up in " ".join(p.cmdline()) for p in _alive(processes)):
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the run's {up} did not come up")
    if up == "raylet":
        time.sleep(1)  # the watchdog notes Ray's processes
    processes = psutil.Process(driver.pid).children(recursive=True)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    return [p.name() for p in _gone_within(processes, 10)]


def test_a_driver_killed_with_9_takes_its_embedded_ray_with_it(tmp_path: Path) -> None:
    """`dataclean run` on the default executor, killed with -9 once its Ray is up: no process of
    that run is left 10 s later (Ray's agents and idle workers outlived it by a minute before)."""
    assert _killed_when(tmp_path, "raylet") == []


def test_a_driver_killed_while_its_ray_starts_leaves_nothing(tmp_path: Path) -> None:
    """Killed with -9 while `ray.init` runs (the watchdog starts first, so it is there): no
    process of that run is left 10 s later."""
    assert _killed_when(tmp_path, "ray_watchdog") == []


def test_a_run_completes_while_another_ray_runs_beside_it(tmp_path: Path, ray_executor: Any) -> None:
    """A second embedded Ray (the tests' own) works while `dataclean run` starts and runs its own."""
    rows = [{"id": f"d{i}", "text": f"Document number {i}, in plain words."} for i in range(200)]
    source = write_jsonl(tmp_path / "in.jsonl", rows)
    run = subprocess.Popen(
        _run_command(source, tmp_path / "out"),
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    while run.poll() is None:
        assert ray_executor.map(abs, [-1, -2, -3]) == [1, 2, 3]
        time.sleep(0.5)
    output = run.stdout.read() if run.stdout else ""
    assert run.returncode == 0, output
    assert len(read_rows(tmp_path / "out" / "data")) == 200


def _die(_item: int) -> int:
    os._exit(1)  # the worker process dies, as an out-of-memory kill would


def test_a_worker_that_keeps_dying_is_one_line(ray_executor: Any) -> None:
    """Ray's own failure (a task whose worker dies past its retries) is an ExecutorError saying
    what failed and what to try, not Ray's traceback."""
    with pytest.raises(
        ExecutorError, match=r"^Ray failed during the run \(\w+Error: .*--executor local"
    ) as raised:
        ray_executor.map(_die, [1])
    assert "\n" not in str(raised.value) and ExecutorError.exit_code == 4


def _marked_processes(driver: int) -> list[int]:
    """Processes carrying `driver`'s mark (`ray_watchdog.MARK`): what its embedded Ray started."""
    mark = f"{ray_watchdog.MARK}={driver}".encode()
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/environ", "rb") as environ:
                    if mark in environ.read().split(b"\0"):
                        found.append(int(name))
            except OSError:
                pass
    return found


def test_a_setting_error_on_the_default_executor_does_not_wait_for_ray(tmp_path: Path) -> None:
    """A bad `--set` value is found before the embedded Ray starts: one line and exit 2, Ray not
    started at all."""
    source = write_jsonl(tmp_path / "in.jsonl", [{"text": "Some words."}])
    command = [sys.executable, "-m", "dataclean", "run", str(source), "-o", str(tmp_path / "out")]
    run = subprocess.run(
        [*command, "--set", "language.keep=zz"], env=_env(), capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 2, run.stderr
    lines = message_lines(run.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: language.keep: 'zz' is not a language code")
    assert "Ray" not in run.stderr


def test_nothing_ray_started_for_a_failed_run_outlives_it(tmp_path: Path) -> None:
    """A run that fails while its Ray starts (its one input is a shard broken at its first line,
    which the driver reads before Ray is up), watched: once the driver exits, every process
    carrying its mark (Ray's GCS, raylet, workers, agents, the watchdog) is gone within 10 s."""
    source = tmp_path / "in.jsonl"
    source.write_text("{broken\n")
    command = [sys.executable, "-m", "dataclean", "run", str(source), "-o", str(tmp_path / "out")]
    driver = subprocess.Popen(command, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen: set[int] = set()
    while driver.poll() is None:
        seen.update(_marked_processes(driver.pid))
        time.sleep(0.05)
    assert driver.returncode == 2
    deadline = time.monotonic() + 10
    while _marked_processes(driver.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert seen, "the run failed before its Ray started: nothing to watch"
    assert _marked_processes(driver.pid) == [], f"left of {len(seen)} seen"
