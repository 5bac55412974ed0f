"""Each compiled kernel once per run, before the first shard: the run layer's side of the
stages' `compile_kernels` and `rehearse` (the stages only say what to compile, never when).

A first run compiles every kernel the pipeline uses (about 10 s of CPU in all; `dataclean.jit`
says how the kernels are written to compile little); later runs load them from numba's on-disk
cache in milliseconds, one cache for the driver and every worker (`dataclean.run.kernel_cache`).
Two things keep that first run short:

- `compile_kernels`: before the first shard, the workers compile the kernels of each stage that
  has some (`Stage.compile_kernels`, or a rehearsal for a stage with `rehearse = True`), one
  stage per worker, the longest first (`Stage.compile_seconds`), into that cache; the driver
  compiles the stages left over. Without it every worker process compiles every kernel itself
  when its first batch needs it: on two workers the same work twice, side by side. With it each
  kernel is compiled once, the stages' kernels in parallel, and every other process loads them.
  When the cache is warm this costs one small task per stage (loading what the workers load
  anyway).
- `compile_in_background`: a run (`dataclean.run.session.Session`) starts compiling in the
  driver while Ray starts (2-5 s, more on a busy machine, when the driver would only wait): on
  an embedded Ray whose workers include the driver, every stage from one queue, longest first,
  the driver taking the first at once and Ray's workers the next ones once they are up (the
  quality stage alone compiles for about as long as the others together: started after Ray's
  start, it ended the first run); elsewhere the first barrier's kernels (dedup's), which the
  driver's `fit` needs.

A stage with `rehearse = True` (dedup) is compiled by a rehearsal (`rehearse`): its observe, fit
on a local executor and apply over a tiny mixed-language corpus, so its kernels compile with the
types of a real run, including those only `fit` reaches.

The cache is shared on one machine only: on a cluster (`--address`), each node has its own, and
`dataclean.run.node_kernels` prepares each node instead of `compile_kernels`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, ClassVar

from dataclean.executors.base import Executor, WorkerFunction, WorkQueue

# Stages whose kernels this process is compiling in the background (`compile_in_background`).
_BACKGROUND: dict[int, Future[None]] = {}
# Stages queued for this process and the executor's workers together (`compile_in_background`).
_SHARED: dict[int, _SharedCompile] = {}


def compile_stage(stage: Any) -> None:
    """Compile one stage's kernels in this process: by a rehearsal (`rehearse`) for a stage that
    asks for one, else by its own `compile_kernels`."""
    if stage.rehearse:
        rehearse(stage.rehearsal_copy())
    else:
        stage.compile_kernels()


def _with_kernels(stages: Sequence[Any]) -> list[Any]:
    from dataclean.stage import Stage

    return [s for s in stages if s.rehearse or type(s).compile_kernels is not Stage.compile_kernels]


def kernel_stages(stages: Sequence[Any]) -> list[Any]:
    """The stages that have kernels to compile (or a rehearsal to run)."""
    return _with_kernels(stages)


def compile_estimate(stages: Sequence[Any], workers: int) -> float:
    """About how many seconds compiling these stages' kernels takes on `workers` workers and the
    driver (`compile_kernels`' schedule): their `Stage.compile_seconds` (each measured alone on
    an idle machine) shared over the cores the compiling processes have, 1.3 times as long as
    alone (measured: compilers side by side slow each other), and never less than the longest."""
    seconds = [float(type(stage).compile_seconds) for stage in _with_kernels(stages)]
    if not seconds:
        return 0.0
    cores = min(max(workers, 1) + 1, os.cpu_count() or 1)
    return max(max(seconds), 1.3 * sum(seconds) / cores)


def compile_in_background(stages: Sequence[Any], executor: Executor | None = None) -> None:
    """Start compiling these stages' kernels in this process while Ray starts (a run,
    `dataclean.run.session`, calls this when the driver has nothing else to do).

    With `executor`, an embedded Ray's this process is one of the workers of
    (`Executor.remote_workers` below `workers`): every stage's kernels are queued longest first,
    and a thread here takes the first at once while the executor's workers take the next ones
    as soon as Ray is up, each the next stage left when it is free (list scheduling: the
    longest first, every process busy to the end). Without one (a cluster, one worker), only
    the first barrier stage that has kernels (dedup), whose `fit` runs here and needs them.
    `compile_kernels` waits for what was started here."""
    from dataclean.stage import GlobalStage

    with_kernels = _with_kernels(stages)
    if executor is not None and executor.remote_workers < executor.workers and len(with_kernels) > 1:
        shared = _SharedCompile(with_kernels, executor)
        for stage in with_kernels:
            _SHARED[id(stage)] = shared
        return
    barrier = next((s for s in with_kernels if isinstance(s, GlobalStage)), None)
    if barrier is not None and id(barrier) not in _BACKGROUND:
        pool = ThreadPoolExecutor(1, thread_name_prefix="dataclean-kernels")
        _BACKGROUND[id(barrier)] = pool.submit(compile_stage, barrier)
        pool.shutdown(wait=False)


def leave_in_background(stages: Sequence[Any]) -> None:
    """Forget the background compiles of `stages` without waiting for them (on a cluster the
    driver runs no shard: its fits load the kernels when they need them, and numba lets one
    compile of a kernel finish before another thread uses it)."""
    for stage in stages:
        _BACKGROUND.pop(id(stage), None)
        _SHARED.pop(id(stage), None)


def compile_kernels(stages: Sequence[Any], executor: Any, cached: bool = False) -> None:
    """Compile the kernels of `stages`, each stage's once (module docstring), and return when
    they are compiled. Stages queued by `compile_in_background` for this process and the
    workers together are waited for. Otherwise the longest go to the executor's workers, one
    stage each, and those left over compile in this process once it has compiled its own
    (`compile_in_background`), which it waits for. Left for the workers, a left-over stage
    would wait for the first of them to finish while this process idles, then compile alone at
    the end (2 s of a first run on 2 cores). With one worker there is nothing to share: the run
    compiles the kernels as it goes. `cached`: an earlier run compiled them all
    (`dataclean.run.kernel_cache.kernels_cached`): the workers load them with their first batch,
    so none is sent a task (which would only wait for the executor, and for its workers to start)."""
    with_kernels = _with_kernels(stages)
    shared = {id(found): found for s in with_kernels if (found := _SHARED.pop(id(s), None)) is not None}
    for queued in shared.values():
        queued.finish(stop=cached or executor.workers <= 1)
    queued_ids = {id(stage) for queued in shared.values() for stage in queued.stages}
    with_kernels = [s for s in with_kernels if id(s) not in queued_ids]
    elsewhere = [s for s in with_kernels if id(s) not in _BACKGROUND]
    elsewhere.sort(key=lambda stage: -type(stage).compile_seconds)
    here = [_BACKGROUND.pop(id(s)) for s in with_kernels if id(s) in _BACKGROUND]
    if cached or executor.workers <= 1:
        elsewhere = []  # loaded, or compiled, as the run goes (docstring)
    # The executor's own workers (this process may be one of the run's: dataclean.session).
    count = executor.remote_workers
    on_workers, left_over = elsewhere[:count], elsewhere[count:]
    with ThreadPoolExecutor(1, thread_name_prefix="dataclean-kernels") as pool:
        remote = pool.submit(executor.map, compile_stage, on_workers) if on_workers else None
        try:
            for compiling in here:
                compiling.result()
            for stage in left_over:
                compile_stage(stage)
        finally:
            if remote is not None:
                remote.result()


class StageCompiler(WorkerFunction):
    """`compile_stage` as the executor's workers run it, from the queue this process takes from too."""

    shareable: ClassVar[bool] = True

    def __call__(self, stage: Any) -> None:
        compile_stage(stage)


class _SharedCompile:
    """Stages' kernels compiled by this process and an embedded Ray's workers from one queue,
    longest first (`compile_in_background`): a thread here starts at once; another hands the
    queue to the executor once it is up (until then, this process alone takes stages)."""

    def __init__(self, stages: list[Any], executor: Executor) -> None:
        self.stages = sorted(stages, key=lambda stage: -type(stage).compile_seconds)
        self.queue: WorkQueue[Any] = WorkQueue(self.stages)
        self.failures: list[BaseException] = []
        self.drained = threading.Event()  # every stage taken: nothing is left for the workers
        self.threads = [
            threading.Thread(target=self._here, name="dataclean-kernels"),
            threading.Thread(target=self._remote, args=(executor,), name="dataclean-kernels-ray"),
        ]
        for thread in self.threads:
            thread.start()

    def _here(self) -> None:
        try:
            while (taken := self.queue.take()) is not None:
                compile_stage(taken[1])
            self.drained.set()
        except BaseException as error:
            self.queue.close()
            self.failures.append(error)

    def _remote(self, executor: Executor) -> None:
        from dataclean.executors.starting import Starting

        try:
            while executor.starting:  # waiting here says nothing (`Starting.ready` would)
                if self.drained.wait(0.05):
                    return  # this process took every stage before the executor was up
            started = executor.ready() if isinstance(executor, Starting) else executor
            started.map_queue(StageCompiler(), self.queue)
        except BaseException as error:
            self.queue.close()
            self.failures.append(error)

    def finish(self, stop: bool = False) -> None:
        """Wait for every stage taken (`stop`: take no more), and raise what failed."""
        if stop:
            self.queue.close()
        for thread in self.threads:
            thread.join()
        if self.failures:
            raise self.failures[0]


# A tiny corpus that takes every branch with a kernel: English and Chinese, near and exact
# duplicates, an empty text.
REHEARSAL_TEXTS = (
    ("en-0", "en", "The quick brown fox jumps over the lazy dog near the river bank at dawn today."),
    ("en-1", "en", "The quick brown fox jumps over the lazy dog near the river bank at dusk today."),
    ("en-2", "en", "The quick brown fox jumps over the lazy dog near the river bank at dawn today."),
    ("zh-0", "zh", "今天早上，敏捷的棕色狐狸在河边跳过了一只懒惰的狗，然后跑回了森林。"),
    ("zh-1", "zh", "今天晚上，敏捷的棕色狐狸在河边跳过了一只懒惰的狗，然后跑回了森林。"),
    ("empty", "und", ""),
)


def rehearsal_batch() -> Any:
    """`REHEARSAL_TEXTS` as a batch in the row contract (id, text, parent_id, lang)."""
    import pyarrow as pa

    from dataclean import columns as C

    ids, langs, texts = zip(*REHEARSAL_TEXTS, strict=True)
    return pa.table(
        {
            C.ID: pa.array(ids, pa.string()),
            C.TEXT: pa.array(texts, pa.string()),
            C.PARENT_ID: pa.array(ids, pa.string()),
            C.LANG: pa.array(langs, pa.string()),
        }
    )


def rehearse(stage: Any) -> None:
    """Run a global stage's observe, fit (on a local executor) and apply over `rehearsal_batch`
    in a temporary folder: its kernels compile with the types of a real run. `stage` must be a
    fresh copy (`Stage.rehearsal_copy`): `fit` leaves its state on it."""
    import tempfile

    import pyarrow.parquet as pq

    from dataclean.executors.local import LocalExecutor
    from dataclean.stage import FitContext

    batch = rehearsal_batch()
    with tempfile.TemporaryDirectory(prefix="dataclean-kernels-") as folder:
        summary = stage.observe(batch)
        summaries = []
        if summary is not None:
            summaries.append(os.path.join(folder, "00000.parquet"))
            pq.write_table(summary, summaries[0])
        stage.fit(FitContext(summaries, os.path.join(folder, "scratch"), LocalExecutor(), [0]))
        stage.begin_shard(0)
        stage(batch)
