"""What an executor is: `map` a picklable function over work items in parallel, then `close`.

The stage contract's `FitContext` hands one to a barrier's `fit`; the run layer
(`dataclean.session`) starts one, runs a pipeline on it and closes it.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class MapFunction(Protocol):
    """What an executor maps: a picklable callable, shipped once to each worker."""

    def __call__(self, item: Any) -> Any: ...


class Executor(Protocol):
    """Runs a function over work items in parallel and returns the results in item order.

    `light=True` says the function holds no model and is cheap to ship (the steps of a barrier's
    `fit`): an executor may then run it as plain tasks instead of a pool of long-lived workers.
    """

    @property
    def workers(self) -> int:
        """How many items it runs at once."""
        ...

    def map(
        self,
        fn: Callable[[T], R],
        items: Sequence[T],
        on_result: Callable[[int, R], None] | None = None,
        light: bool = False,
    ) -> list[R]: ...

    def close(self) -> None:
        """Release what the executor started (an embedded Ray); a no-op for the others."""


class WorkQueue(Generic[T]):
    """Work items shared by several takers (the driver and an executor's workers, while the
    executor starts: `dataclean.session`): each item is taken once, in order, with its index."""

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
