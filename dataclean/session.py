"""A run's lifecycle around `run_pipeline`: what starts, what overlaps and what stops, in one place.

    with Session(load_stages, "ray") as session:
        stats = session.run(inputs, output, read_options, progress=progress)

Entering starts the executor while a thread loads the stages (`ray.init` mostly waits for Ray's
processes to start, about 2 s; the recipe and the modules its stages import load meanwhile), then
starts compiling the first barrier's kernels in the driver (`dataclean.warmup.compile_in_background`)
and loads the report's code ahead of the report (0.4 s off it). Leaving closes the executor; after
a `run` that finished, it writes OUT/report.html at the same time (Ray's shutdown mostly waits for
its processes to exit, the report mostly reads Parquet). A report that cannot be built is a
warning, never a failed run (`write_run_report`).

`exit_process` is the end of the `dataclean` command: see its docstring for why it skips the
interpreter's teardown.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any

from dataclean.executors import make_executor
from dataclean.executors.base import Executor
from dataclean.io.readers import ReadOptions
from dataclean.run import ALREADY_COMPLETE, Progress, run_pipeline, write_run_report
from dataclean.stage import Stage
from dataclean.warmup import compile_in_background

log = logging.getLogger(__name__)


class Session:
    """One run: stages, an executor, and the start-up and shutdown work overlapped (module docstring).

    `stages`: the stages, or a function that builds them (called in a thread while the executor
    starts). `executor`: `"ray"` or `"local"` (started here with `address` and `workers`, and
    closed on leaving), or an executor object (the caller's: used, never closed here).
    """

    def __init__(
        self,
        stages: Sequence[Stage] | Callable[[], Sequence[Stage]],
        executor: str | Executor = "ray",
        address: str | None = None,
        workers: int | None = None,
    ) -> None:
        self._load = stages if callable(stages) else (lambda: list(stages))
        self._executor_spec = executor
        self._address = address
        self._workers = workers
        self._owns_executor = isinstance(executor, str)
        self._finished: str | None = None  # the output folder of a run that finished
        self.stages: list[Stage] = []
        self.executor: Executor | None = None

    def __enter__(self) -> Session:
        with ThreadPoolExecutor(1, thread_name_prefix="dataclean-load") as pool:
            loading = pool.submit(self._load_ahead)
            self.executor = self._start_executor()
            try:
                self.stages = loading.result()
            except BaseException:
                self._close()
                raise
        return self

    def _start_executor(self) -> Executor:
        spec = self._executor_spec
        if isinstance(spec, str):
            executor: Executor = make_executor(spec, self._address, self._workers)
            return executor
        return spec

    def _load_ahead(self) -> list[Stage]:
        """The stages, then their barrier's kernels started compiling and the report's code
        loaded (this runs while the executor starts). A report that cannot load is the report's
        problem: it warns when it is written, and the run goes on."""
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
        progress: Progress | None = None,
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
            progress,
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
