"""A run's lifecycle around `run_pipeline`: what starts, what overlaps and what stops, in one place.

    with Session(load_stages, "ray") as session:
        stats = session.run(inputs, output, read_options, progress=progress)

Entering loads the stages first (a recipe or `--set` error is raised before anything starts,
about 1 s after the command), then starts the executor in a thread (`ray.init` mostly waits for
Ray's processes to start, 2-5 s) and goes on: on a first run it starts compiling the first
barrier's kernels in the driver (`dataclean.warmup.compile_in_background`), and it loads the
report's code in a thread (0.4 s off the report). `run` checks what it can without the executor
(the output folder, the inputs, the recipe's columns: `run_pipeline`), and a map it calls before
the executor is up starts in this process (`_Starting`): nothing waits for Ray until it must. A
run that fails before it needs the executor leaves it to close itself when it is up, or to die
with the process (`dataclean.executors.ray_watchdog` is started before Ray).

Leaving closes the executor; after a `run` that finished, it writes OUT/report.html at the same
time (Ray's shutdown mostly waits for its processes to exit, the report mostly reads Parquet). A
report that cannot be built is a warning, never a failed run (`write_run_report`).

`exit_process` is the end of the `dataclean` command: see its docstring for why it skips the
interpreter's teardown.
"""

from __future__ import annotations

import copy
import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from types import TracebackType
from typing import Any, Generic, TypeVar

from dataclean.executors import make_executor
from dataclean.executors.base import Executor, WorkQueue
from dataclean.executors.local import LocalExecutor
from dataclean.executors.ray_startup import exit_on_sigterm
from dataclean.io.readers import ReadOptions
from dataclean.kernel_cache import kernels_cached
from dataclean.progress import RunProgress, Silent
from dataclean.run import ALREADY_COMPLETE, run_pipeline, write_run_report
from dataclean.stage import Stage
from dataclean.warmup import compile_in_background, kernel_stages

log = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")


class _Starting:
    """The executor, started in a thread; meanwhile the run goes on in this process.

    What needs the executor first waits for it (and says so if that is a wait), so everything
    checked before that is checked while it starts. A `map` of a function marked `shareable`
    (`dataclean.runner.GroupWorker`: a group of stages over shards) called before it is up does
    not wait: this process runs the items one by one (on a copy of the function: the original still ships
    with no model loaded) until the executor is up and its workers have loaded the function and
    its models (`RayExecutor.map_queue`), then they take the others from the same queue
    (`WorkQueue`) and this process finishes the item it runs. A light map (a barrier's fit steps:
    cheap, no model) runs here whole while the executor starts.
    Results are the same wherever an item runs (each task writes its own files; the executors
    give byte-identical outputs). A small run may so end before Ray is up: it never waits for it.

    With `driver_works` (an embedded Ray on two cores or more: `Session`), this process is one of
    the run's workers for the whole run, not only while the executor starts: it takes items of
    every shareable or light map beside the executor's workers, to the last one, and the
    executor was started with one worker fewer. Each Ray worker costs about 3 CPU-seconds before
    its first item (importing Ray, dataclean and numba, loading the models and kernels), which
    this process has already paid: on 2 cores, a run of 30,000 documents took 0.9-2.9 s less
    (3 alternating pairs, docs/embedded-ray.md).

    The thread lives as long as the executor and closes it: Ray starts its node processes with
    the parent-death signal, which Linux sends when the *thread* that started them ends, so a
    thread that started Ray and ended would take the GCS and raylet with it."""

    def __init__(
        self,
        start: Callable[[], Executor],
        workers: int | None,
        progress: RunProgress,
        driver_works: bool = False,
    ) -> None:
        self._future: Future[Executor] = Future()
        self._workers = workers
        self._progress = progress
        self._driver_works = driver_works
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(start,), daemon=True)
        self._thread.name = "dataclean-executor"
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
    def starting(self) -> bool:
        """Whether the executor is still starting."""
        return not self._future.done()

    @property
    def workers(self) -> int:
        """The workers asked for (an embedded Ray has them, this process included when it works),
        else the started executor's."""
        return self._workers if self._workers is not None else self.ready().workers

    @property
    def remote_workers(self) -> int:
        """The executor's own workers: `workers`, less this process when it is one of them."""
        return max(1, self.workers - 1) if self._driver_works else self.workers

    def map(
        self,
        fn: Callable[[T], R],
        items: Sequence[T],
        on_result: Callable[[int, R], None] | None = None,
        light: bool = False,
    ) -> list[R]:
        if not items:
            return []
        shareable = getattr(fn, "shareable", False)
        if light and not self._future.done():  # a fit's steps: cheap, no model; here, rather than wait
            return LocalExecutor().map(fn, items, on_result)
        if self._driver_works and (light or shareable):
            return _Shared(fn, items, on_result, to_the_end=True).run(self._future)
        if self._future.done() or not shareable:
            return self.ready().map(fn, items, on_result, light)
        return _Shared(fn, items, on_result).run(self._future)

    def close(self) -> None:
        """Close it once it is up: at once if it is, else when it is (the process may end
        first: the embedded Ray's watchdog then takes it along)."""
        self._closing.set()
        if self._future.done():
            self._thread.join()


class _Shared(Generic[T, R]):
    """One `map` shared by this process and a starting (or started) executor (`_Starting`): this
    process takes items until the executor's workers are ready, or, `to_the_end`, until none is
    left."""

    def __init__(
        self,
        fn: Callable[[T], R],
        items: Sequence[T],
        on_result: Callable[[int, R], None] | None,
        to_the_end: bool = False,
    ) -> None:
        self.fn = fn
        self.to_the_end = to_the_end
        self.items = items
        self.on_result = on_result
        self.queue: WorkQueue[T] = WorkQueue(items)
        self.results: dict[int, R] = {}
        self.lock = threading.Lock()
        self.remote_started = threading.Event()  # the executor's workers are ready
        self.failure: BaseException | None = None

    def record(self, index: int, result: R) -> None:
        with self.lock:
            self.results[index] = result
            if self.on_result is not None:
                self.on_result(index, result)

    def _remote(self, executor: Executor) -> None:
        try:
            map_queue = getattr(executor, "map_queue", None)
            if map_queue is not None:  # its workers warm up, then take items beside this process
                map_queue(self.fn, self.queue, self.record, on_warm=self.remote_started.set)
            else:  # an executor without a shared queue: it takes what is left, at once
                self.remote_started.set()
                left = self.queue.close()
                results = executor.map(self.fn, [item for _, item in left])
                for (index, _), result in zip(left, results, strict=True):
                    self.record(index, result)
        except BaseException as error:
            self.failure = error
        finally:
            self.remote_started.set()

    def run(self, starting: Future[Executor]) -> list[R]:
        local = copy.deepcopy(self.fn)  # models load into the copy; `fn` ships without them
        remote: threading.Thread | None = None
        try:
            while self.to_the_end or not self.remote_started.is_set():
                if self.failure is not None:  # an item failed on the executor: the map ends
                    self.queue.close()
                    break
                if remote is None and starting.done():
                    executor = starting.result()
                    remote = threading.Thread(target=self._remote, args=(executor,), name="dataclean-map")
                    remote.start()
                taken = self.queue.take()
                if taken is None:
                    break
                self.record(taken[0], local(taken[1]))
        except BaseException:
            self.queue.close()  # the executor's workers finish what they run, and take no more
            if remote is not None:
                remote.join()
            raise
        if remote is not None:  # (without one, the loop ended on an empty queue: all ran here)
            remote.join()
        if self.failure is not None:
            raise self.failure
        return [self.results[i] for i in range(len(self.items))]


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
        self.progress.step("loading stages")
        self.stages = list(self._load())  # a recipe or setting error: raised before anything starts
        spec = self._executor_spec
        if spec == "ray":
            self._say_start()
            exit_on_sigterm()  # ray.init, in a thread, cannot (dataclean.executors.ray_startup)
            known = None if self._address else self._workers or os.cpu_count() or 1
            # An embedded Ray on 2 cores or more: this process is one of the workers (`_Starting`).
            driver_works = known is not None and known > 1
            ray_workers = known - 1 if driver_works and known is not None else self._workers
            start = lambda: make_executor(spec, self._address, ray_workers)  # noqa: E731
            self.executor = _Starting(start, known, self.progress, driver_works)
        elif isinstance(spec, str):  # starts at once
            self.executor = make_executor(spec, self._address, self._workers)
        else:
            self.executor = spec
        if not kernels_cached([type(stage) for stage in kernel_stages(self.stages)]):
            compile_in_background(self.stages)  # a later run loads them from the cache as it goes
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


def exit_process(code: int | str | None) -> None:
    """End the `dataclean` program: flush what the command wrote, then leave without the
    interpreter's teardown of Ray's, Arrow's and numba's native modules, which takes another
    0.4-0.6 s after a run (measured on the 1M-document benchmark) and does nothing a finished
    command needs. Unless Ray is still up (an embedded Ray is stopped by its atexit hook): then
    exit the ordinary way. (A Ray still starting in the session's thread ends with the process: its
    watchdog takes its processes along.) Only for the program's own process, never from a library call."""
    ray = sys.modules.get("ray")
    is_initialized = getattr(ray, "is_initialized", None)  # (a Ray still importing in a thread has none)
    if is_initialized is not None and is_initialized():
        sys.exit(code)
    if isinstance(code, str):  # what sys.exit would print
        print(code, file=sys.stderr)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)
