"""The executor contract (`dataclean.executors.base`) on its own: what an executor declares, what a
mapped function declares, the defaults, and the refusal of anything else."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar, TypeVar

import pytest

from dataclean.errors import ExecutorError
from dataclean.executors.base import (
    CAPABILITIES,
    Executor,
    WorkerFunction,
    WorkQueue,
    is_shareable,
    require_executor,
    warm,
)
from dataclean.executors.local import LocalExecutor

T = TypeVar("T")
R = TypeVar("R")


class Minimal(Executor):
    """Only what an executor must write: `workers` and `map`; the rest are the contract's defaults."""

    @property
    def workers(self) -> int:
        return 3

    def map(
        self,
        fn: Callable[[T], R],
        items: Sequence[T],
        on_result: Callable[[int, R], None] | None = None,
        light: bool = False,
    ) -> list[R]:
        return [fn(item) for item in items]


class Loads(WorkerFunction):
    shareable: ClassVar[bool] = True

    def __init__(self) -> None:
        self.loaded = 0

    def warm(self) -> None:
        self.loaded += 1

    def __call__(self, item: int) -> int:
        return item * 2


def test_a_minimal_executor_gets_every_other_capability_from_the_contract() -> None:
    executor = require_executor(Minimal())
    assert all(hasattr(executor, name) for name in CAPABILITIES)
    assert executor.remote_workers == 3 and executor.starting is False
    queue: WorkQueue[int] = WorkQueue([5, 6, 7])
    assert queue.take() == (0, 5)  # another taker had the first item
    seen: list[tuple[int, int]] = []
    warmed: list[bool] = []
    found = executor.map_queue(
        lambda x: x + 1, queue, lambda i, r: seen.append((i, r)), lambda: warmed.append(True)
    )
    assert found == {1: 7, 2: 8} and seen == [(1, 7), (2, 8)] and warmed == [True]
    assert queue.take() is None
    executor.close()  # the default holds nothing


def test_an_executor_must_say_how_many_items_it_runs_and_how_it_maps() -> None:
    class NoMap(Executor):
        @property
        def workers(self) -> int:
            return 1

    with pytest.raises(TypeError, match="abstract"):
        NoMap()  # type: ignore[abstract]


def test_an_object_that_only_looks_like_an_executor_is_refused_naming_what_it_lacks() -> None:
    class Lookalike:
        workers = 1
        remote_workers = 1
        starting = False

        def map(self, fn: object, items: list[object]) -> list[object]:
            return []

        def map_queue(self) -> None: ...

        def nodes(self) -> list[object]:
            return []

        def on_node(self) -> None: ...

        def close(self) -> None: ...

    with pytest.raises(ExecutorError, match=r"^Lookalike is not an executor: it subclass dataclean"):
        require_executor(Lookalike())
    with pytest.raises(ExecutorError, match=r"^int is not an executor: it lacks workers, remote_workers"):
        require_executor(3)
    local = LocalExecutor()
    assert require_executor(local) is local and local.workers == 1


def test_a_function_declares_whether_it_may_share_and_how_it_warms() -> None:
    fn = Loads()
    assert is_shareable(fn) and not is_shareable(abs) and not is_shareable(lambda x: x)
    warm(fn)
    warm(abs)  # declares nothing: nothing to do
    assert fn.loaded == 1
    assert LocalExecutor().map(fn, [1, 2]) == [2, 4]
