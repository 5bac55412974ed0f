"""Compiled kernels: one cache for every process of a run, and each stage's kernels compiled ahead
with exactly the signatures a real run uses (the first run's cost is in
benchmarks/bench_first_run.py, not here)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dataclean.executors.base import Executor
from dataclean.run.kernel_cache import shared_cache_dir, sources_key
from dataclean.stage import Stage
from tests.conftest import ROOT


def _timed_stage(stage_name: str, seconds: float, on_compile: Callable[[str], None]) -> Stage:
    """A stage named `stage_name` that declares `seconds` of compiling and calls `on_compile`
    with its name when its kernels compile (the two scheduling tests' stand-in)."""
    from dataclasses import dataclass
    from typing import ClassVar

    import pyarrow as pa

    @dataclass
    class Timed(Stage):
        name: ClassVar[str] = stage_name
        compile_seconds: ClassVar[float] = seconds

        def __call__(self, table: pa.Table) -> pa.Table:
            return table

        def compile_kernels(self) -> None:
            on_compile(self.name)

    return Timed()


def _python(script: str, env: dict[str, str]) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={**os.environ, **env},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip().splitlines()[-1]


def test_the_cache_is_a_per_user_folder_unless_numba_cache_dir_is_set(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    script = "import dataclean, numba; print(numba.config.CACHE_DIR)"
    found = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**env, "XDG_CACHE_HOME": str(tmp_path)},
        timeout=120,
    )
    folder = Path(found.stdout.strip())
    assert folder.parent == tmp_path / "dataclean" / "numba", found.stderr
    assert folder.name == sources_key(ROOT / "dataclean") and folder.is_dir()
    chosen = _python(script, {"NUMBA_CACHE_DIR": str(tmp_path / "mine")})
    assert chosen == str(tmp_path / "mine")
    # numba imported first: still the shared folder, for the kernels dataclean imports later
    late = _python(
        "import numba, dataclean.run.kernel_cache as k; k.use_shared_cache(); print(numba.config.CACHE_DIR)",
        {"NUMBA_CACHE_DIR": str(tmp_path / "late")},
    )
    assert late == str(tmp_path / "late")
    assert shared_cache_dir().parts[-3:-1] == ("dataclean", "numba")


def test_the_cache_folder_follows_the_sources_contents_not_their_times(tmp_path: Path) -> None:
    """numba compiles a kernel again when its own file changes, not when a function it calls in
    another file does: the folder is keyed by every source's content, so such a change gets a new
    folder, and a file touched but unchanged keeps it."""
    package = tmp_path / "package"
    (package / "data" / "quality").mkdir(parents=True)
    (package / "kernel.py").write_text("def kernel(x):\n    return helper(x)\n")
    (package / "helper.py").write_text("def helper(x):\n    return x + 1\n")
    (package / "data" / "quality" / "table.json").write_text("{}")
    first = sources_key(package)
    os.utime(package / "helper.py", (1, 1))
    assert sources_key(package) == first
    (package / "helper.py").write_text("def helper(x):\n    return x + 2\n")
    assert sources_key(package) != first
    (package / "helper.py").write_text("def helper(x):\n    return x + 1\n")
    assert sources_key(package) == first
    (package / "data" / "quality" / "table.json").write_text('{"a": 1}')
    assert sources_key(package) != first


def test_a_new_cache_folder_removes_only_stale_ones(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    parent = tmp_path / "dataclean" / "numba"
    stale, recent = parent / "0000000000000000", parent / "1111111111111111"
    for folder in (stale, recent):
        (folder / "dataclean-compiled").mkdir(parents=True)
    old = time.time() - 8 * 86400
    os.utime(stale, (old, old))
    found = subprocess.run(
        [sys.executable, "-c", "import dataclean, numba; print(numba.config.CACHE_DIR)"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**env, "XDG_CACHE_HOME": str(tmp_path)},
        timeout=120,
    )
    assert Path(found.stdout.strip()).is_dir(), found.stderr
    assert not stale.exists() and recent.is_dir()


def _cache_dir(_: int) -> str:
    import numba

    import dataclean.quality.signals as kernels

    return f"{numba.config.CACHE_DIR} {kernels._signals_kernel._cache._cache_path}"


def test_ray_workers_use_the_drivers_cache(ray_executor: Any) -> None:
    import numba

    found = set(ray_executor.map(_cache_dir, [0, 1, 2, 3]))
    assert len(found) == 1
    folder, kernel_folder = found.pop().split(" ")
    assert folder == numba.config.CACHE_DIR
    assert kernel_folder.startswith(folder)


COVERAGE = """
    import collections, sys
    from numba.core import event
    import pipelines.default
    from dataclean.executors.local import LocalExecutor
    from dataclean.run import run_pipeline
    from dataclean.run.kernels import compile_stage

    compiled = collections.Counter()

    class Compiled(event.Listener):
        def on_start(self, ev): pass
        def on_end(self, ev):
            function = ev.data["dispatcher"].py_func
            if function.__module__.startswith("dataclean"):
                compiled[function.__module__ + "." + function.__qualname__] += 1

    event.register("numba:compile", Compiled())
    for stage in pipelines.default.build():
        compile_stage(stage)
    ahead = sum(compiled.values())
    compiled.clear()
    run_pipeline([sys.argv[1]], sys.argv[2], pipelines.default.build(), LocalExecutor())
    print(ahead, dict(compiled))
"""


def test_compiling_ahead_covers_every_kernel_signature_a_run_compiles(tmp_path: Path) -> None:
    # An empty cache: compile_kernels compiles; the run after it, over a real mixed-language corpus
    # (the bundled sample), must find every kernel it calls already compiled, with its types.
    cache = tmp_path / "cache"
    cache.mkdir()
    sample = ROOT / "dataclean" / "data" / "sample"
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(COVERAGE), str(sample), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
        env={**os.environ, "NUMBA_CACHE_DIR": str(cache)},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    ahead, during = result.stdout.strip().splitlines()[-1].split(" ", 1)
    assert int(ahead) >= 20  # the clean, dedup and perplexity kernels
    assert during == "{}"


class _Recorder(Executor):
    """An executor of two workers that runs `map` in this process and records what it ran."""

    def __init__(self) -> None:
        self.mapped: list[str] = []

    @property
    def workers(self) -> int:
        return 2

    def map(self, fn: Any, items: Any, on_result: Any = None, light: bool = False) -> list[Any]:
        self.mapped.extend(item.name for item in items)
        return [fn(item) for item in items]


def test_the_driver_compiles_the_barriers_kernels_while_the_workers_take_the_others() -> None:
    import threading
    from dataclasses import dataclass
    from typing import ClassVar

    import pyarrow as pa

    from dataclean.run.kernels import compile_in_background, compile_kernels
    from dataclean.stage import FitContext, GlobalStage, Stage

    compiled: dict[str, str] = {}

    @dataclass
    class RowLocal(Stage):
        name: ClassVar[str] = "row_local"

        def __call__(self, table: pa.Table) -> pa.Table:
            return table

        def compile_kernels(self) -> None:
            compiled[self.name] = threading.current_thread().name

    @dataclass
    class Barrier(GlobalStage):
        name: ClassVar[str] = "barrier"

        def __call__(self, table: pa.Table) -> pa.Table:
            return table

        def fit(self, context: FitContext) -> None:
            pass

        def compile_kernels(self) -> None:
            compiled[self.name] = threading.current_thread().name

    @dataclass
    class NoKernels(Stage):
        name: ClassVar[str] = "plain"

        def __call__(self, table: pa.Table) -> pa.Table:
            return table

    stages = [RowLocal(), Barrier(), NoKernels()]
    compile_in_background(stages)
    executor = _Recorder()
    compile_kernels(stages, executor)
    assert executor.mapped == ["row_local"]  # each stage's kernels once: the barrier's on the driver
    assert compiled["barrier"].startswith("dataclean-kernels") and set(compiled) == {"row_local", "barrier"}
    compiled.clear()
    compile_kernels(stages, executor)  # nothing left in the background: all on the workers
    assert executor.mapped == ["row_local", "row_local", "barrier"]


def test_the_workers_take_the_longest_stages_and_this_process_the_rest() -> None:
    # Three stages for two workers: the two longest go to the workers, one each, and the shortest
    # compiles here once this process is free, not on a worker after its first stage.
    import threading

    from dataclean.run.kernels import compile_kernels

    compiled: dict[str, str] = {}

    def record(stage_name: str) -> None:
        compiled[stage_name] = threading.current_thread().name

    def stage(stage_name: str, seconds: float) -> Stage:
        return _timed_stage(stage_name, seconds, record)

    executor = _Recorder()
    compile_kernels([stage("short", 1.0), stage("long", 3.0), stage("middle", 2.0)], executor)
    assert executor.mapped == ["long", "middle"]
    assert compiled["short"] == threading.current_thread().name
    assert compiled["long"] == compiled["middle"] != compiled["short"]  # the recorder's thread


class _Sharing(_Recorder):
    """Two workers, this process one of them: Ray's one worker takes stages from the queue once
    `up` is set (until then the executor is starting)."""

    def __init__(self) -> None:
        super().__init__()
        import threading

        self.up = threading.Event()
        self.took = threading.Event()

    @property
    def remote_workers(self) -> int:
        return 1

    @property
    def starting(self) -> bool:
        return not self.up.is_set()

    def map_queue(self, fn: Any, queue: Any, on_result: Any = None, on_warm: Any = None) -> dict[int, Any]:
        while (taken := queue.take()) is not None:
            self.mapped.append(taken[1].name)
            self.took.set()
            fn(taken[1])
        return {}


def test_the_driver_starts_on_the_longest_stage_and_the_workers_take_the_next_once_up() -> None:
    # The driver's thread takes the longest stage at once; once the executor is up its worker
    # takes the next one from the same queue; every stage compiles once.
    import threading

    from dataclean.run.kernels import compile_in_background, compile_kernels

    executor = _Sharing()
    compiled: dict[str, list[str]] = {}

    def record(stage_name: str) -> None:
        compiled.setdefault(stage_name, []).append(threading.current_thread().name)
        if stage_name == "long":  # Ray comes up while the driver compiles the longest
            executor.up.set()
            assert executor.took.wait(10)

    def stage(stage_name: str, seconds: float) -> Stage:
        return _timed_stage(stage_name, seconds, record)

    stages = [stage("short", 1.0), stage("long", 3.0), stage("middle", 2.0)]
    compile_in_background(stages, executor)
    compile_kernels(stages, executor)
    assert compiled["long"] == ["dataclean-kernels"]
    assert executor.mapped[0] == "middle"
    assert sorted(compiled) == ["long", "middle", "short"]
    assert all(len(threads) == 1 for threads in compiled.values())
