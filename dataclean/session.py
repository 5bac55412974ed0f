"""A run's lifecycle around `run_pipeline`: what starts, what overlaps and what stops, in one place.

    with Session(load_stages, "ray") as session:
        stats = session.run(inputs, output, read_options, progress=progress)

Entering starts the executor in a thread (`ray.init` mostly waits for Ray's processes to start,
about 2 s) while this thread loads the stages: a recipe or `--set` error is raised at once,
whatever Ray is doing (the starting executor is then left to close itself when it is up, or to
die with the process: `dataclean.executors.ray_watchdog` is started before Ray). It then starts
compiling the first barrier's kernels in the driver (`dataclean.warmup.compile_in_background`) and
loads the report's code ahead of the report (0.4 s off it). `run` checks what it can without the
executor (the output folder, the inputs, the recipe's columns: `run_pipeline`) before it first
waits for it. Leaving closes the executor; after a `run` that finished, it writes OUT/report.html
at the same time (Ray's shutdown mostly waits for its processes to exit, the report mostly reads
Parquet). A report that cannot be built is a warning, never a failed run (`write_run_report`).

`exit_process` is the end of the `dataclean` command: see its docstring for why it skips the
interpreter's teardown.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from types import TracebackType
from typing import Any, TypeVar

from dataclean.executors import make_executor
from dataclean.executors.base import Executor
from dataclean.executors.ray_startup import exit_on_sigterm
from dataclean.io.readers import ReadOptions
from dataclean.progress import RunProgress, Silent
from dataclean.run import ALREADY_COMPLETE, run_pipeline, write_run_report
from dataclean.stage import Stage
from dataclean.warmup import compile_in_background

log = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")


class _Starting:
    """The executor, started in a thread: what uses it first waits for it (and says so if that is
    a wait), so that everything checked before that use is checked while it starts.

    The thread lives as long as the executor and closes it: Ray starts its node processes with
    the parent-death signal, which Linux sends when the *thread* that started them ends, so a
    thread that started Ray and ended would take the GCS and raylet with it."""

    def __init__(self, start: Callable[[], Executor], progress: RunProgress) -> None:
        self._future: Future[Executor] = Future()
        self._progress = progress
        self._closing = threading.Event()
        self._thread = threading.Thread(
            target=self._serve, args=(start,), name="dataclean-executor", daemon=True
        )
        self._thread.start()

    def _serve(self, start: Callable[[], Executor]) -> None:
        try:
            executor = start()
        except BaseException as error:
            self._future.set_exception(error)
            return
        self._future.set_result(executor)
        self._closing.wait()
        executor.close()

    def ready(self) -> Executor:
        """The executor, once started (raises what starting it raised)."""
        if not self._future.done():
            self._progress.step("waiting for Ray to start")
        return self._future.result()

    @property
    def workers(self) -> int:
        return self.ready().workers

    def map(
        self,
        fn: Callable[[T], R],
        items: Sequence[T],
        on_result: Callable[[int, R], None] | None = None,
        light: bool = False,
    ) -> list[R]:
        return self.ready().map(fn, items, on_result, light)

    def close(self) -> None:
        """Close it once it is up: at once if it is, else when it is (the process may end
        first: the embedded Ray's watchdog then takes it along)."""
        self._closing.set()
        if self._future.done():
            self._thread.join()


class Session:
    """One run: stages, an executor, and the start-up and shutdown work overlapped (module docstring).

    `stages`: the stages, or a function that builds them (called in this thread while the
    executor starts). `executor`: `"ray"` or `"local"` (started here with `address` and
    `workers`, and closed on leaving), or an executor object (the caller's: used, never closed
    here). `progress`: told what the run does from its first second (`dataclean.progress`).
    """

    def __init__(
        self,
        stages: Sequence[Stage] | Callable[[], Sequence[Stage]],
        executor: str | Executor = "ray",
        address: str | None = None,
        workers: int | None = None,
        progress: RunProgress | None = None,
    ) -> None:
        self._load = stages if callable(stages) else (lambda: list(stages))
        self._executor_spec = executor
        self._address = address
        self._workers = workers
        self._owns_executor = isinstance(executor, str)
        self._finished: str | None = None  # the output folder of a run that finished
        self.progress: RunProgress = progress or Silent()
        self.stages: list[Stage] = []
        self.executor: Executor | None = None

    def __enter__(self) -> Session:
        spec = self._executor_spec
        if isinstance(spec, str):
            self._say_start(spec)
            if spec == "ray":
                exit_on_sigterm()  # ray.init, in a thread, cannot (dataclean.executors.ray_startup)
            start = lambda: make_executor(spec, self._address, self._workers)  # noqa: E731
            self.executor = _Starting(start, self.progress)
        else:
            self.executor = spec
        try:
            self.stages = self._load_ahead()
        except BaseException:
            self._close()
            raise
        return self

    def _say_start(self, spec: str) -> None:
        if spec != "ray":
            return
        if self._address:
            self.progress.step(f"connecting to Ray at {self._address}")
        else:
            workers = self._workers or os.cpu_count() or 1
            self.progress.step(f"starting Ray (embedded, {workers} worker{'s' if workers > 1 else ''})")

    def _load_ahead(self) -> list[Stage]:
        """The stages, then their barrier's kernels started compiling and the report's code
        loaded (this runs while the executor starts). A report that cannot load is the report's
        problem: it warns when it is written, and the run goes on."""
        self.progress.step("loading stages")
        stages = list(self._load())
        compile_in_background(stages)
        try:
            from dataclean.report import prepare

            prepare()
        except Exception as error:
            log.debug("report not prepared ahead: %s", error)
        return stages

    def run(
        self,
        inputs: Sequence[Any],
        output: str,
        read_options: ReadOptions | None = None,
        overwrite: bool = False,
        keep_work: bool = False,
        progress: RunProgress | None = None,
        pipeline_name: str = "custom",
    ) -> dict[str, Any]:
        """`run_pipeline` with this session's stages and executor; the report is written on
        leaving the session, while the executor closes. Returns the run's stats."""
        if self.executor is None:
            raise RuntimeError("Session.run: enter the session first (`with Session(...) as session`)")
        stats = run_pipeline(
            list(inputs),
            output,
            self.stages,
            self.executor,
            read_options,
            overwrite,
            keep_work,
            progress or self.progress,
            pipeline_name=pipeline_name,
            report=False,
        )
        if not stats.get(ALREADY_COMPLETE):  # a finished run's report stays as it is
            self._finished = output
        return stats

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        finished, self._finished = self._finished, None
        if finished is None or kind is not None:
            self._close()
            return
        closing = threading.Thread(target=self._close, name="dataclean-executor-close")
        closing.start()
        try:
            self.progress.step("writing report")
            write_run_report(finished)
        finally:
            closing.join()

    def _close(self) -> None:
        if self.executor is not None and self._owns_executor:
            self.executor.close()
        self.executor = None


def exit_process(code: int | str | None) -> None:
    """End the `dataclean` program: flush what the command wrote, then leave without the
    interpreter's teardown of Ray's, Arrow's and numba's native modules, which takes another
    0.4-0.6 s after a run (measured on the 1M-document benchmark) and does nothing a finished
    command needs. Unless Ray is still up (an embedded Ray is stopped by its atexit hook): then
    exit the ordinary way. Only for the program's own process, never from a library call."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        sys.exit(code)
    if isinstance(code, str):  # what sys.exit would print
        print(code, file=sys.stderr)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)
