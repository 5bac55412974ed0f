"""An executor that starts in a thread while the run goes on, and the maps it shares with this process.

`Session` (`dataclean.run.session`) starts an embedded Ray this way: `ray.init` mostly waits for
Ray's processes (2-5 s), and what the run can do before then (checks, its first shards, a fit's
light steps) it does in this process meanwhile.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Generic, TypeVar

from dataclean.executors.base import Executor, Node, WorkQueue, is_shareable
from dataclean.executors.local import LocalExecutor

T = TypeVar("T")
R = TypeVar("R")


class Starting(Executor):
    """The executor, started in a thread; meanwhile the run goes on in this process.

    What needs the executor first waits for it (and says so if that is a wait), so everything
    checked before that is checked while it starts. A `map` of a function marked `shareable`
    (`dataclean.run.shard.GroupWorker`: a group of stages over shards) called before it is up does
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
    thread that started Ray and ended would take the GCS and raylet with it.

    `cluster`: it joins a cluster (`--address`), whose machines `nodes` names once it is up."""

    def __init__(
        self,
        start: Callable[[], Executor],
        workers: int | None,
        on_wait: Callable[[], None] = lambda: None,
        driver_works: bool = False,
        cluster: bool = False,
    ) -> None:
        self._future: Future[Executor] = Future()
        self._cluster = cluster
        self._workers = workers
        self._on_wait = on_wait
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
        """The executor, once started (raises what starting it raised); `on_wait` is called
        first when that is a wait (the run says so)."""
        if not self._future.done():
            self._on_wait()
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

    def nodes(self) -> list[Node]:
        """A cluster's machines, once joined (`cluster`: started with an address); [] at once for
        an embedded Ray, without waiting for it."""
        return self.ready().nodes() if self._cluster else []

    def on_node(self, fn: Callable[[T], R], items: Sequence[T], node: Node) -> list[Future[R]]:
        """The started executor's `on_node`."""
        return self.ready().on_node(fn, items, node)

    def map(
        self,
        fn: Callable[[T], R],
        items: Sequence[T],
        on_result: Callable[[int, R], None] | None = None,
        light: bool = False,
    ) -> list[R]:
        if not items:
            return []
        shareable = is_shareable(fn)
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
    """One `map` shared by this process and a starting (or started) executor (`Starting`): this
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
            # Its workers warm up, then take items beside this process (an executor without a
            # queue of its own takes what is left at once: `Executor.map_queue`).
            executor.map_queue(self.fn, self.queue, self.record, on_warm=self.remote_started.set)
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
