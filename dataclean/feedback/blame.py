"""Which samples of a spiking batch carry the spike: listed in loss order until the rest is normal.

A `data` spike is a batch whose excess loss sits on some of its samples. The rule practitioners
apply ("take the bad samples out and the batch is back at its level") is applied literally, with
a floor and a ceiling:

- the floor: a sample is listed when it stands out from the clean spread. With the per-sample
  losses of the steps before the spike (`recent`: the detector's window), the floor is their
  `quantile` (0.99) plus half its distance from their median: above nearly every sample trained
  lately, by a margin of their own spread (a clean batch of 16 has a sample above the 0.99
  quantile about one time in seven: on the planted runs of `dataclean feedback`'s tests, a clean
  2.22 against a 0.99 quantile of 2.18 was listed without the margin). That
  spread is the real one of a mixed corpus (English and Chinese bytes differ by a nat for a
  byte-level model), which no statistic of one batch of 16 sees. Without them, Rosner's
  generalized ESD test with robust statistics: the i-th highest stands out when it is at least
  `z` spreads (1.4826 times the MAD) above the median of the samples below it and `ratio` times
  that median, and the count is the largest i that does, not the first that does not (the
  culprits below the top one are judged against the clean samples, not against a median and a
  MAD the other culprits inflated: how a whole-batch z-score misses half of 6 culprits of 16);
- every sample above the floor is listed, highest first, whether or not the rest is back in its
  band yet (stopping as soon as it is would leave visible culprits to be drawn again: on a
  byte-level run, 2 of 8 corrupt samples at 5.75 nats, against a clean maximum of 3.85, were left
  when the listing stopped there); then, while the rest is still above its band, the next ones
  in loss order that are above the `low_quantile` (0.95) of the recent samples;
- the ceiling: at most `share` of the batch's finite samples (0.6: a batch of 16 may list 9; a
  batch that rose as a whole is not a few samples' doing);
- the listing explains the spike when the rest of the batch averages back in its pre-spike band
  (`target`: the top of the band the playbook judges recovery by, carried on the spike event;
  without one, `batch_normal` times the level). The band's top is the 0.9 quantile of recent
  batch means, about 1.3 of their standard deviations above the level; the mean of the m samples
  left of n wanders sqrt(n / m) times as far as a whole batch's, and a batch of two languages
  wanders more with its mix, so the rest must be within twice the band's width above the level,
  times sqrt(n / m) (8 left of 16: 2.8 times the width): a clean rest almost never lands beyond.

A non-finite loss in a batch of finite ones is always listed. A batch of fewer than four finite
losses is judged against the recent level instead (three times it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from dataclean.feedback.robust import MAD_SCALE


@dataclass
class Blame:
    """The samples a batch's losses blame, and the figures the evidence states."""

    sample_ids: list[str] = field(default_factory=list)
    reference: float = math.nan  # median of the samples not listed
    floor: float = math.nan  # the loss a sample had to reach to be listed
    ceiling: int = 0  # most samples that may be listed
    rest_mean: float = math.nan  # the mean of the finite losses not listed
    rest_median: float = math.nan
    target: float = math.nan  # the band the rest must be back in

    @property
    def explains(self) -> bool:
        """The rule holds: something is listed and without it the batch is back in its band."""
        return bool(self.sample_ids) and self.rest_mean <= self.target


def band_of_rest(level: float, target: float, size: int, left: int) -> float:
    """The band's top for the mean of `left` samples of a batch of `size` (module docstring)."""
    if not (math.isfinite(level) and math.isfinite(target)) or target <= level or left <= 0:
        return target
    return level + 2 * (target - level) * math.sqrt(size / left)


def _esd_count(ranked: np.ndarray, ceiling: int, z: float, ratio: float, min_spread: float) -> int:
    """How many of the highest losses (`ranked`, descending) stand out by the generalized ESD rule."""
    listed = 0
    for i in range(ceiling):  # the i-th highest against the samples below it
        below = ranked[i + 1 :]
        median = float(np.median(below))
        spread = float(np.median(np.abs(below - median))) * MAD_SCALE
        spread = max(spread, min_spread * abs(median), 1e-9)
        if ranked[i] >= max(median + z * spread, ratio * median):
            listed = i + 1
    return listed


def blame_samples(
    ids: list[str],
    losses: np.ndarray,
    level: float,
    target: float,
    recent: np.ndarray | None = None,
    z: float = 3.5,
    ratio: float = 1.5,
    share: float = 0.6,
    quantile: float = 0.99,
    low_quantile: float = 0.95,
    min_spread: float = 0.01,
) -> Blame:
    """The samples of one batch (`ids`, `losses`) that carry its spike, highest first (see the
    module docstring): `level` is the recent loss level, `target` the top of the band the rest
    must be back in, `recent` the per-sample losses of the steps before the spike (or None)."""
    losses = np.asarray(losses, dtype="float64")
    names = np.asarray([str(i) for i in ids], dtype=object)
    finite = np.isfinite(losses)
    found = Blame(target=target)
    values = losses[finite]
    count = len(values)
    picked: list[str] = []
    if count >= 4:
        found.ceiling = max(1, int(share * count))
        order = np.argsort(-values, kind="stable")
        ranked = values[order]
        history = None if recent is None else recent[np.isfinite(recent)]
        low = math.inf
        if history is not None and len(history) >= 4 * count:
            top, low, middle = (float(v) for v in np.quantile(history, [quantile, low_quantile, 0.5]))
            found.floor = top + 0.5 * (top - middle)
            eligible = int((ranked[: found.ceiling] >= found.floor).sum())
        else:
            eligible = _esd_count(ranked, found.ceiling, z, ratio, min_spread)
            found.floor = float(ranked[eligible - 1]) if eligible else math.nan
        total = float(ranked[eligible:].sum())
        while (
            eligible < found.ceiling
            and ranked[eligible] >= low
            and total / (count - eligible) > band_of_rest(level, target, count, count - eligible)
        ):  # the rest is not back in its band yet: the next one that stands out a little
            total -= float(ranked[eligible])
            eligible += 1
        picked = [str(i) for i in names[finite][order[:eligible]]]
        found.reference = float(np.median(ranked[eligible:]))
        found.target = band_of_rest(level, target, count, count - eligible)
    else:
        found.floor = 3 * level
        picked = [str(i) for i in names[finite & (losses >= found.floor)]]
    found.sample_ids = list(dict.fromkeys(picked))
    if finite.any() and not finite.all():  # NaN on some samples of a finite batch: blame them too
        found.sample_ids += [i for i in dict.fromkeys(names[~finite]) if i not in found.sample_ids]
    rest = losses[finite & ~np.isin(names, found.sample_ids)]
    if len(rest):
        found.rest_mean, found.rest_median = float(rest.mean()), float(np.median(rest))
    return found
