"""Which samples of a spiking batch carry the spike: listed in loss order until the rest is normal.

A `data` spike is a batch whose excess loss sits on some of its samples. The rule practitioners
apply ("take the bad samples out and the batch is back at its level") is applied literally:

- the clean spread: the lowest samples of the batch, all but the `ceiling` highest, are taken as
  clean (at most `blame_share` of a batch, about half, can be blamed, so the rest is clean by
  construction); their median is the clean reference and 1.4826 times their MAD its spread.
  Measuring the spread on the whole batch instead lets the culprits inflate it: with 6 corrupt
  samples of 16 the median and the MAD rise so far that half of the culprits no longer stand out;
- the floor: a sample is listed only if its loss is at least `blame_z` spreads above the clean
  reference and `blame_ratio` times it, so a clean batch's worst sample is never listed;
- the ceiling: at most `blame_share` of the batch's finite samples;
- every sample above the floor is listed, highest first (a visible culprit left in the batch
  would be drawn again after a rollback), and the listing explains the spike when the rest of the
  batch then averages inside the pre-spike band (`target`: the top of the band the playbook
  judges recovery by, carried on the spike event; without one, `batch_normal` times the level).

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
    reference: float = math.nan  # median of the clean part of the batch
    floor: float = math.nan  # the loss a sample must reach to be listed
    ceiling: int = 0  # most samples that may be listed
    rest_mean: float = math.nan  # the mean of the finite losses not listed
    rest_median: float = math.nan
    target: float = math.nan  # the band the rest must be back in

    @property
    def explains(self) -> bool:
        """The rule holds: something is listed and without it the batch is back in its band."""
        return bool(self.sample_ids) and self.rest_mean <= self.target


def blame_samples(
    ids: list[str],
    losses: np.ndarray,
    level: float,
    target: float,
    z: float = 3.5,
    ratio: float = 1.5,
    share: float = 0.5,
    min_spread: float = 0.01,
) -> Blame:
    """The samples of one batch (`ids`, `losses`) that stand out from its clean spread, highest
    first, at most `share` of them; `level` is the recent loss level and `target` the top of the
    band the rest must be back in (see the module docstring)."""
    losses = np.asarray(losses, dtype="float64")
    names = np.asarray([str(i) for i in ids], dtype=object)
    finite = np.isfinite(losses)
    found = Blame(target=target)
    values = losses[finite]
    count = len(values)
    if count >= 4:
        found.ceiling = max(1, int(share * count))
        clean = np.sort(values)[: count - found.ceiling]
        found.reference = float(np.median(clean))
        spread = float(np.median(np.abs(clean - found.reference))) * MAD_SCALE
        spread = max(spread, min_spread * abs(found.reference), 1e-9)
        found.floor = max(found.reference + z * spread, ratio * found.reference)
        order = np.argsort(-values, kind="stable")[: found.ceiling]
        picked = [str(i) for i in names[finite][order[values[order] >= found.floor]]]
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
