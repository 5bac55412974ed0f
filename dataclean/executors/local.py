"""The local executor: runs every task in this process, in order. For tests and small data."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from dataclean.executors.base import Executor

T = TypeVar("T")
R = TypeVar("R")


class LocalExecutor(Executor):
    """In-process `map`: the function object is used as it is, so resources load once."""

    @property
    def workers(self) -> int:
        """One: items run one after the other."""
        return 1

    def map(
        self,
        fn: Callable[[T], R],
        items: Sequence[T],
        on_result: Callable[[int, R], None] | None = None,
        light: bool = False,
    ) -> list[R]:
        results = []
        for index, item in enumerate(items):
            result = fn(item)
            if on_result is not None:
                on_result(index, result)
            results.append(result)
        return results
