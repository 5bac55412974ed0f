"""A run's lifecycle around `run_pipeline`: what starts, what overlaps and what stops, in one place.

    with Session(load_stages, "ray") as session:
        stats = session.run(inputs, output, read_options, progress=progress)

Entering loads the stages first (a recipe or `--set` error is raised before anything starts,
about 1 s after the command), then starts the executor in a thread (`ray.init` mostly waits for
Ray's processes to start, 2-5 s) and goes on: on a first run it starts compiling the kernels,
longest stage first, in the driver, and hands the stages left to Ray's workers once they are up
(`dataclean.run.kernels.compile_in_background`), and it loads the
report's code in a thread (0.4 s off the report). `run` checks what it can without the executor
(the output folder, the inputs, the recipe's columns: `run_pipeline`), and a map it calls before
the executor is up starts in this process (`dataclean.executors.starting.Starting`): nothing
waits for Ray until it must. A run that fails before it needs the executor leaves it to close
itself when it is up, or to die with the process (`dataclean.executors.ray_watchdog` is started before Ray).

Leaving closes the executor; after a `run` that finished, it writes OUT/report.html at the same
time (Ray's shutdown mostly waits for its processes to exit, the report mostly reads Parquet). A
report that cannot be built is a warning, never a failed run (`write_run_report`).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

from dataclean.executors import make_executor
from dataclean.executors.base import Executor, require_executor
from dataclean.executors.ray_startup import exit_on_sigterm
from dataclean.executors.starting import Starting
from dataclean.io.readers import ReadOptions
from dataclean.run.kernel_cache import kernels_cached
from dataclean.run.kernels import compile_in_background, kernel_stages
from dataclean.run.pipeline import ALREADY_COMPLETE, run_pipeline, write_run_report
from dataclean.run.progress import RunProgress, Silent
from dataclean.stage import Stage

log = logging.getLogger(__name__)


class Session:
    """One run: stages, an executor, and the start-up and shutdown work overlapped (module docstring).

    `stages`: the stages, or a function that builds them (called in this thread while the
    executor starts). `executor`: `"ray"` or `"local"` (started here with `address` and
    `workers`, and closed on leaving), or an executor object (the caller's: used, never closed
    here). `progress`: told what the run does from its first second (`dataclean.run.progress`).
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
        self.progress.step("loading stages")
        self.stages = list(self._load())  # a recipe or setting error: raised before anything starts
        spec = self._executor_spec
        shares: Executor | None = None  # the executor this process is one of the workers of
        if spec == "ray":
            self._say_start()
            exit_on_sigterm()  # ray.init, in a thread, cannot (dataclean.executors.ray_startup)
            known = None if self._address else self._workers or os.cpu_count() or 1
            # An embedded Ray on 2 cores or more: this process is one of the workers (`Starting`).
            driver_works = known is not None and known > 1
            ray_workers = known - 1 if driver_works and known is not None else self._workers
            start = lambda: make_executor(spec, self._address, ray_workers)  # noqa: E731
            on_wait = lambda: self.progress.step("waiting for Ray to start")  # noqa: E731
            self.executor = Starting(start, known, on_wait, driver_works, cluster=bool(self._address))
            shares = self.executor if driver_works else None
        elif isinstance(spec, str):  # starts at once
            self.executor = make_executor(spec, self._address, self._workers)
        else:
            self.executor = require_executor(spec)
        if not kernels_cached([type(stage) for stage in kernel_stages(self.stages)]):
            compile_in_background(self.stages, shares)  # a later run loads them from the cache as it goes
        threading.Thread(target=_prepare_report, name="dataclean-report-code", daemon=True).start()
        return self

    def _say_start(self) -> None:
        if self._address:
            self.progress.step(f"connecting to Ray at {self._address}")
        else:
            workers = self._workers or os.cpu_count() or 1
            detail = f"{workers} workers: this process and {workers - 1} of Ray's"
            if workers == 1:
                detail = "1 worker"
            self.progress.step(f"starting Ray (embedded, {detail})")

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


def _prepare_report() -> None:
    """Load the report's code ahead of the report (0.4 s off it). A report that cannot load is
    the report's problem: it warns when it is written, and the run goes on."""
    try:
        from dataclean.report import prepare

        prepare()
    except Exception as error:
        log.debug("report not prepared ahead: %s", error)
