"""Timing rounds that treat every implementation alike: the same warm-up, the same repetitions.

`timed_rounds` runs each implementation `warmup` times untimed, then `rounds` rounds in which each
runs once, in an order rotated every round (so none is always first after a pause). A ratio is
only ever taken between two timings of the same round (`round_ratios`), never between the best
of one and the best of another; figures are reported as the median with the min-max over rounds
(`spread`). On a shared machine whose speed drifts from minute to minute, two runs of one round
are the ones most alike.

Benchmarks only: tests never import this module.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any


def timed_rounds(
    candidates: dict[str, Callable[[], Any]], rounds: int, warmup: int = 1
) -> dict[str, list[float]]:
    """Seconds of each candidate per round, after `warmup` untimed calls of each."""
    names = list(candidates)
    for _ in range(warmup):
        for name in names:
            candidates[name]()
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for number in range(max(1, rounds)):
        shift = number % len(names)
        for name in names[shift:] + names[:shift]:
            started = time.perf_counter()
            candidates[name]()
            seconds[name].append(time.perf_counter() - started)
    return seconds


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median and min-max of a list of figures (seconds, rates or ratios)."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def round_ratios(reference_seconds: Sequence[float], ours_seconds: Sequence[float]) -> list[float]:
    """Per round: how many times faster ours ran than the reference in that same round."""
    return [theirs / ours for theirs, ours in zip(reference_seconds, ours_seconds, strict=True)]


def describe(values: Sequence[float], digits: int = 2, unit: str = "") -> str:
    """'median (min-max)' as text, e.g. '3.10x (2.80-3.40x)'."""
    found = spread(values)
    if len(values) == 1:
        return f"{found['median']:.{digits}f}{unit}"
    return f"{found['median']:.{digits}f}{unit} ({found['min']:.{digits}f}-{found['max']:.{digits}f}{unit})"
