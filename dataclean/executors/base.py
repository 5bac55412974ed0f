"""What an executor is: `map` a picklable function over work items in parallel, then `close`.

The stage contract's `FitContext` hands one to a barrier's `fit`; the run layer
(`dataclean.run.session`) starts one, runs a pipeline on it and closes it. `Executor` declares
every capability the run uses; `WorkerFunction` what a mapped function may declare about itself.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import ClassVar, Generic, TypeVar

from dataclean.errors import ExecutorError

T = TypeVar("T")
R = TypeVar("R")


class WorkerFunction:
    """What a function an executor maps may declare about itself (a mixin; a plain callable
    declares nothing and gets the defaults).

    `shareable`: its items may run in the driver beside the executor's workers (each writes its
    own files, the same wherever it runs): a `Starting` executor then starts them in this process
    while Ray starts. `warm()` loads what its items need (models), once per process, ahead of the
    first item: an executor that shares a queue may warm its workers before they take items.
    """

    shareable: ClassVar[bool] = False

    def warm(self) -> None:
        """Load what the items need, once per process."""


def is_shareable(fn: object) -> bool:
    """Whether `fn` declares that its items may run in the driver (`WorkerFunction.shareable`)."""
    return isinstance(fn, WorkerFunction) and fn.shareable


def warm(fn: object) -> None:
    """Run `fn`'s `warm()` when it declares one (`WorkerFunction`)."""
    if isinstance(fn, WorkerFunction):
        fn.warm()


@dataclass(frozen=True)
class Node:
    """One machine of a cluster (`Executor.nodes`): its id, network address and CPUs."""

    id: str
    address: str
    cpus: int


class Executor(ABC):
    """Runs a function over work items in parallel and returns the results in item order.

    Every capability the run layer uses is declared here, with a default where one exists, so a
    new executor implements this list and nothing else is probed:

    - `workers` (required): how many items it runs at once;
    - `map(fn, items, on_result, light)` (required): results in item order; `on_result(index,
      result)` as each finishes. `light=True` says the function holds no model and is cheap (the
      steps of a barrier's `fit`): an executor may run it without a pool of warmed workers (the
      `Starting` executor runs it in the driver while Ray starts; the others run it as any map);
    - `map_queue(fn, queue, on_result, on_warm)`: take items from a queue shared with another
      taker (the driver) until it is empty; default: take every item left at once and `map` them;
    - `remote_workers`: its own workers, less the driver when the driver takes items too;
      default `workers`;
    - `starting`: whether it is still starting (a first run's compile estimate adds Ray's
      start); default False;
    - `nodes()`: the machines of a cluster it runs on, each with disks (and a kernel cache) of
      its own; default none: it runs on this machine (local, an embedded Ray);
    - `on_node(fn, items, node)`: `fn` over `items` on that machine only, futures at once (a
      node compiling its kernels beside the run: `dataclean.run.node_kernels`); default: here;
    - `close()`: release what it started (an embedded Ray); default nothing.

    `require_executor` refuses an object that is not one, naming what it lacks.
    """

    @property
    @abstractmethod
    def workers(self) -> int:
        """How many items it runs at once."""

    @property
    def remote_workers(self) -> int:
        """Its own workers (the driver excluded when the driver takes items too)."""
        return self.workers

    @property
    def starting(self) -> bool:
        """Whether it is still starting."""
        return False

    @abstractmethod
    def map(
        self,
        fn: Callable[[T], R],
        items: Sequence[T],
        on_result: Callable[[int, R], None] | None = None,
        light: bool = False,
    ) -> list[R]:
        """`fn` over `items`, results in item order (see the class docstring)."""

    def map_queue(
        self,
        fn: Callable[[T], R],
        queue: WorkQueue[T],
        on_result: Callable[[int, R], None] | None = None,
        on_warm: Callable[[], None] | None = None,
    ) -> dict[int, R]:
        """Run items taken from `queue` until it is empty; {index: result} of those it ran.
        `on_warm` is called once its workers may take items (here: at once)."""
        if on_warm is not None:
            on_warm()
        left = queue.close()
        results = self.map(fn, [item for _, item in left])
        found: dict[int, R] = {}
        for (index, _), result in zip(left, results, strict=True):
            found[index] = result
            if on_result is not None:
                on_result(index, result)
        return found

    def nodes(self) -> list[Node]:
        """The machines of the cluster it runs on that take work; [] on one machine."""
        return []

    def on_node(self, fn: Callable[[T], R], items: Sequence[T], node: Node) -> list[Future[R]]:
        """Start `fn` over `items` on `node` only (one of `nodes()`); a future per item, returned
        before they finish. Default (one machine): run here, one after the other."""
        futures: list[Future[R]] = []
        for item in items:
            future: Future[R] = Future()
            try:
                future.set_result(fn(item))
            except Exception as error:
                future.set_exception(error)
            futures.append(future)
        return futures

    def close(self) -> None:  # noqa: B027 - most executors hold nothing
        """Release what the executor started (an embedded Ray); a no-op for the others."""


# What the run layer uses of an executor: `require_executor` checks an object has each.
CAPABILITIES = ("workers", "remote_workers", "starting", "map", "map_queue", "nodes", "on_node", "close")


def require_executor(executor: object) -> Executor:
    """`executor` as an `Executor`; an object that is not one is refused in one line naming the
    capabilities it lacks (a duck-typed object with all of them is refused too: subclass
    `Executor`, whose defaults are part of the contract)."""
    if isinstance(executor, Executor):
        return executor
    missing = [name for name in CAPABILITIES if not hasattr(executor, name)]
    lacks = f"lacks {', '.join(missing)}; " if missing else ""
    raise ExecutorError(
        f"{type(executor).__name__} is not an executor: it {lacks}subclass "
        "dataclean.executors.base.Executor, which declares every capability a run uses"
    )


class WorkQueue(Generic[T]):
    """Work items shared by several takers (the driver and an executor's workers, while the
    executor starts: `dataclean.executors.starting`): each item is taken once, in order, with its index."""

    def __init__(self, items: Iterable[T]) -> None:
        self._items = deque(enumerate(items))
        self._lock = threading.Lock()

    def take(self) -> tuple[int, T] | None:
        """The next (index, item), or None when every item is taken or the queue is closed."""
        with self._lock:
            return self._items.popleft() if self._items else None

    def close(self) -> list[tuple[int, T]]:
        """Take every item left (no taker gets another); returns them."""
        with self._lock:
            left = list(self._items)
            self._items.clear()
            return left
