"""The Ray executor: Ray Data `map_batches` over the work items, with a pool of actors.

(`map(..., light=True)`, for the short steps of a barrier's `fit`, runs plain Ray tasks instead:
an actor pool costs one to three seconds to start, longer than those steps take.)

Each work item is one row of a Ray Data dataset; `map_batches` runs a callable class, so every
actor deserializes the mapped function (a `GroupWorker` with its stages) once and keeps it: models
load once per worker, never once per batch. Actors are restarted and their tasks retried when a
worker process dies. Without an address, an embedded local Ray starts with all local cores (or
`workers`); with one, the executor joins that cluster. Only this module imports Ray.
"""

from __future__ import annotations

import logging
import os
import pickle
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pyarrow as pa

T = TypeVar("T")
R = TypeVar("R")


class _Apply:
    """The Ray Data callable class: holds the mapped function and the items for one `map` call."""

    def __init__(self, payload: bytes) -> None:
        fn, items = pickle.loads(payload)
        self.fn = fn
        self.items = items

    def __call__(self, batch: pa.Table) -> pa.Table:
        indices = batch.column("index").to_pylist()
        results = [pickle.dumps(self.fn(self.items[i])) for i in indices]
        return pa.table({"index": indices, "result": pa.array(results, pa.binary())})


def _call_item(fn: Callable[[T], R], item: T) -> R:
    """A plain Ray task: `fn` arrives resolved from the object store (shipped once per map)."""
    return fn(item)


class RayExecutor:
    """`map` on Ray Data with `workers` actors (default: every CPU of the cluster)."""

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        # Ray Data reads its log level when first imported: keep its INFO chatter off the CLI.
        os.environ.setdefault("RAY_DATA_LOG_LEVEL", "ERROR")
        import ray
        import ray.data

        self._started_here = False
        if not ray.is_initialized():
            if address:
                ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
            else:
                ray.init(
                    address="local",  # always a new embedded Ray, never another one on this machine
                    num_cpus=workers or os.cpu_count() or 1,
                    include_dashboard=False,
                    log_to_driver=False,
                    logging_level=logging.WARNING,
                )
                self._started_here = True
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.workers = max(1, min(workers or cpus, cpus))
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False
        context.print_on_execution_start = False
        context.verbose_stats_logs = False

    def map(
        self,
        fn: Callable[[T], R],
        items: Sequence[T],
        on_result: Callable[[int, R], None] | None = None,
        light: bool = False,
    ) -> list[R]:
        import ray

        if not items:
            return []
        if light:
            return self._tasks(fn, items, on_result)
        for module in list(sys.modules.values()):
            if getattr(module, "__dataclean_recipe__", False):  # a user's recipe file
                ray.cloudpickle.register_pickle_by_value(module)
        # cloudpickle: functions and classes defined in scripts and notebooks travel too. The
        # payload (the worker with its stages, and small task descriptors) goes by value so a
        # restarted actor can always rebuild it.
        payload = ray.cloudpickle.dumps((fn, list(items)))
        dataset = ray.data.from_items(
            [{"index": i} for i in range(len(items))], override_num_blocks=len(items)
        ).map_batches(
            _Apply,
            fn_constructor_args=(payload,),
            batch_size=1,
            batch_format="pyarrow",
            compute=ray.data.ActorPoolStrategy(size=min(self.workers, len(items))),
            num_cpus=1,  # Ray Data's actor pools restart dead actors and retry their tasks
        )
        results: dict[int, R] = {}
        for batch in dataset.iter_batches(batch_format="pyarrow", batch_size=None):
            for index, blob in zip(
                batch.column("index").to_pylist(), batch.column("result").to_pylist(), strict=True
            ):
                results[index] = pickle.loads(blob)
                if on_result is not None:
                    on_result(index, results[index])
        return [results[i] for i in range(len(items))]

    def _tasks(
        self, fn: Callable[[T], R], items: Sequence[T], on_result: Callable[[int, R], None] | None
    ) -> list[R]:
        """Plain Ray tasks (retried if their worker dies), at most `workers` in flight: no actor
        pool to start, which is what the short steps of a barrier's `fit` need."""
        import ray

        function = ray.put(fn)
        remote = ray.remote(_call_item).options(num_cpus=1, max_retries=3)
        pending: dict[Any, int] = {}
        results: dict[int, R] = {}
        queue = list(enumerate(items))
        while queue or pending:
            while queue and len(pending) < self.workers:
                index, item = queue.pop(0)
                pending[remote.remote(function, item)] = index
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                index = pending.pop(ref)
                results[index] = ray.get(ref)
                if on_result is not None:
                    on_result(index, results[index])
        return [results[i] for i in range(len(items))]

    def close(self) -> None:
        """Stop the embedded Ray if this executor started it."""
        import ray

        if self._started_here and ray.is_initialized():
            ray.shutdown()
