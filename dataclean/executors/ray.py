"""The Ray executor: plain Ray tasks over the work items, the mapped function kept per worker.

Each item (a shard for a stage group, or a step of a barrier's `fit`) is one Ray task, retried
when its worker process dies; at most `workers` run at once, and the next item goes to whichever
finishes first (shards differ in size). The mapped function (a `GroupWorker` with its stages) goes
to the object store once per `map`; each worker process deserializes it, and loads its stages'
models, once, then keeps it for the other items it runs. Ray reuses its worker processes across
tasks and maps, so imports and compiled kernels load once per process for the whole run.

Why not Ray Data's `map_batches`: it starts a new actor pool (new processes importing numba and
KenLM again) for every dataset it executes. A run executes one `map` per stage group plus four
in dedup's `fit`, and that start-up (1-3 s each here) held the 1M-document benchmark to a 1.37x
speed-up from 1 to 2 workers; with plain tasks it is 1.57x (`benchmarks/bench_scale.py`).
Rows never pass through the object store: workers read and write Parquet under OUT/.

Without an address, an embedded local Ray starts with all local cores (or `workers`), listening on
the loopback interface only, its start and stop sped up by `dataclean.executors.ray_startup`,
and a watchdog (`dataclean.executors.ray_watchdog`) takes its processes with it if the driver dies
without closing it (`kill -9`); with an address, the executor joins that cluster, and `nodes`
names its machines (those with CPUs) so that `on_node` can pin a task to each (its kernels).
Only these two modules import Ray.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

from dataclean.errors import DatacleanError, ExecutorError
from dataclean.executors import ray_watchdog
from dataclean.executors.base import Executor, Node, WorkQueue, warm
from dataclean.executors.ray_startup import (
    loopback_only,
    quick_node_wait,
    quiet_start_notices,
    stop_autoscaler_monitor,
    without_idle_processes,
)

T = TypeVar("T")
R = TypeVar("R")


_FUNCTIONS: dict[str, Any] = {}
# An embedded Ray has one node: a raylet the GCS declares dead ends the run. On a shared machine
# under load (another Ray starting, seven jobs on two cores) Ray's defaults (5 missed checks, 10 s
# each) declared a live raylet dead and failed a run; 20 misses of up to 30 s each wait it out.
EMBEDDED_HEALTH_CHECKS = {"health_check_timeout_ms": 30_000, "health_check_failure_threshold": 20}


def _call_item(wrapped: list[Any], item: T) -> Any:
    """A plain Ray task. The function comes by reference (wrapped in a list, so Ray does not
    resolve it) and is kept per worker process: a process that runs several items of one map
    deserializes the function, and loads its stages' models, once."""
    return _function(wrapped)(item)


def _function(wrapped: list[Any]) -> Any:
    """The map's function in this worker process: deserialized (its stages' models loaded) once."""
    import ray

    key = wrapped[0].hex()
    fn = _FUNCTIONS.get(key)
    if fn is None:
        _FUNCTIONS.clear()  # one map at a time: drop the previous map's function and models
        fn = _FUNCTIONS[key] = ray.get(wrapped[0])
    return fn


def _call_pinned(fn: Callable[[Any], Any], item: Any) -> Any:
    """A task pinned to one node (`RayExecutor.on_node`): the function comes by value (a few
    small calls per node, never the map's function kept per worker)."""
    return fn(item)


def _ship_recipes() -> None:
    """A user's recipe file (its stage classes) travels by value: the cluster has no copy."""
    import ray

    for module in list(sys.modules.values()):
        if getattr(module, "__dataclean_recipe__", False):
            ray.cloudpickle.register_pickle_by_value(module)  # type: ignore[no-untyped-call]


def _warm(wrapped: list[Any], _slot: int) -> None:
    """A task that readies a worker for the map's items: the function loaded, and its `warm()`
    (loading models) run where it has one."""
    warm(_function(wrapped))


def _result(ref: Any) -> Any:
    """A task's result; a `DatacleanError` raised in the worker is raised here as itself, so the
    CLI prints the same one line and exit status as on the local executor (Ray would otherwise
    raise its own wrapper, whose message is the worker's whole traceback)."""
    import ray

    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as error:
        if isinstance(error.cause, DatacleanError):
            raise error.cause from None
        raise
    except ray.exceptions.RayError as error:  # Ray's own failure: a node, a worker, an object lost
        raise ExecutorError(
            f"Ray failed during the run ({_first_line(error)}); run the same command again to go on "
            "from the shards already done, or add --executor local to run without Ray"
        ) from None


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0][:200]}" if lines else type(error).__name__


class RayExecutor(Executor):
    """`map` as plain Ray tasks, `workers` at a time (default: every CPU of the cluster)."""

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        import ray

        self._started_here = False
        self._joined = bool(address)  # a cluster: `nodes` names its machines
        self._watchdog: Any = None
        if not ray.is_initialized():
            if not address:  # before Ray starts: a driver that dies while it starts takes it along
                self._watchdog = ray_watchdog.start(os.getpid())
            try:
                self._start(ray, address, workers)
            except Exception as error:
                ray_watchdog.stop(self._watchdog)
                where = f"Ray at {address}" if address else "the embedded Ray"
                raise ExecutorError(
                    f"{where} did not start ({_first_line(error)}); try again (a busy machine can be "
                    "slow to start it), or add --executor local to run without Ray"
                ) from None
            self._started_here = not address
        cpus = int(ray.cluster_resources().get("CPU", 1))  # type: ignore[no-untyped-call]
        self._workers = max(1, min(workers or cpus, cpus))

    @property
    def workers(self) -> int:
        """Its Ray tasks in flight at once: the workers asked for, at most the cluster's CPUs."""
        return self._workers

    @staticmethod
    def _start(ray: Any, address: str | None, workers: int | None) -> None:
        if address:
            with quiet_start_notices():  # (started in a thread: the SIGTERM notice, as below)
                ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
            return
        with quick_node_wait(), quiet_start_notices(), loopback_only(), without_idle_processes():
            ray.init(
                address="local",  # always a new embedded Ray, never another one here
                num_cpus=workers or os.cpu_count() or 1,
                include_dashboard=False,
                log_to_driver=False,
                logging_level=logging.WARNING,
                _system_config=EMBEDDED_HEALTH_CHECKS,
            )

    def map(
        self,
        fn: Callable[[T], R],
        items: Sequence[T],
        on_result: Callable[[int, R], None] | None = None,
        light: bool = False,
    ) -> list[R]:
        if not items:
            return []
        results = self.map_queue(fn, WorkQueue(items), on_result)
        return [results[i] for i in range(len(items))]

    def map_queue(
        self,
        fn: Callable[[T], R],
        queue: WorkQueue[T],
        on_result: Callable[[int, R], None] | None = None,
        on_warm: Callable[[], None] | None = None,
    ) -> dict[int, R]:
        """Run items taken from `queue` (shared with another taker: `dataclean.executors.starting`) until
        it is empty; {index: result} of those this executor ran. With `on_warm`, every worker
        first loads the function (and runs its `warm()`: a `GroupWorker` loads its models)
        before any takes an item, and `on_warm` is called then: the other taker goes on until
        then, rather than wait for a worker's start on its first item."""
        import ray

        _ship_recipes()
        function = ray.put(fn)
        if on_warm is not None:
            warm_task: Any = ray.remote(_warm).options(num_cpus=1, max_retries=3)
            for ref in [warm_task.remote([function], slot) for slot in range(self.workers)]:
                _result(ref)
            on_warm()
        return self._tasks(function, queue, on_result)

    def _tasks(
        self, function: Any, queue: WorkQueue[T], on_result: Callable[[int, R], None] | None
    ) -> dict[int, R]:
        """Plain Ray tasks, retried if their worker process dies, at most `workers` in flight."""
        import ray

        remote: Any = ray.remote(_call_item).options(num_cpus=1, max_retries=3)
        pending: dict[Any, int] = {}
        results: dict[int, R] = {}

        def submit() -> None:
            while len(pending) < self.workers:
                taken = queue.take()
                if taken is None:
                    return
                pending[remote.remote([function], taken[1])] = taken[0]

        submit()
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            finished = [pending.pop(ref) for ref in done]
            for index, ref in zip(finished, done, strict=True):
                results[index] = _result(ref)
            submit()  # the freed worker starts its next item while the driver handles this result
            if on_result is not None:
                for index in finished:
                    on_result(index, results[index])
        return results

    def nodes(self) -> list[Node]:
        """The live machines of the cluster it joined that have CPUs; [] for an embedded Ray
        (one machine) and once Ray is shut down."""
        import ray

        if not self._joined or not ray.is_initialized():
            return []
        return [
            Node(str(node["NodeID"]), str(node["NodeManagerAddress"]), int(node["Resources"]["CPU"]))
            for node in ray.nodes()  # type: ignore[no-untyped-call]
            if node.get("Alive") and node.get("Resources", {}).get("CPU", 0) >= 1
        ]

    def on_node(self, fn: Callable[[T], R], items: Sequence[T], node: Node) -> list[Future[R]]:
        """Each item a task on `node` only (it fails, never moves, if that node dies), one CPU each."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        _ship_recipes()
        strategy = NodeAffinitySchedulingStrategy(node.id, soft=False)
        options = {"num_cpus": 1, "max_retries": 1, "scheduling_strategy": strategy}
        remote: Any = ray.remote(_call_pinned).options(**options)
        return [remote.remote(fn, item).future() for item in items]

    def close(self) -> None:
        """Stop the embedded Ray if this executor started it."""
        import ray

        if self._started_here and ray.is_initialized():
            stop_autoscaler_monitor()
            ray.shutdown()
        ray_watchdog.stop(self._watchdog)
        self._watchdog = None
