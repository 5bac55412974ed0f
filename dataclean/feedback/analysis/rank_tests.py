"""Rank statistics for comparing a group's scores with the rest's, within strata (languages).

- the Mann-Whitney U test, one-sided (the group scores higher), with the normal approximation,
  the tie correction and the continuity correction, as `scipy.stats.mannwhitneyu(...,
  alternative="greater", method="asymptotic")`;
- its stratified form: U, its mean and its variance summed over strata (van Elteren's test with
  equal weights), so a group is compared only with the samples of its own stratum: a language
  that is harder for the model shifts every sample of it, and within the language that cancels;
- the effect size A = U / (n1 n2) (Vargha & Delaney's A: the probability that a sample of the
  group scores above one of the rest; 0.5 is no difference), pooled over strata, with a 95%
  confidence interval from Hanley & McNeil's (1982) standard error of A in each stratum;
- Benjamini & Hochberg's adjusted p-values (q-values) over every group tested.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass
class Comparison:
    """A group against the rest of its strata: effect A, its 95% interval, one-sided p, pairs."""

    effect: float
    low: float
    high: float
    p_value: float
    pairs: int  # group x rest pairs compared (0: no stratum has both)


def _ranks(values: np.ndarray) -> tuple[np.ndarray, float]:
    """Average ranks (1-based) of `values` and the tie term sum(t^3 - t)."""
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    average = ends - (counts - 1) / 2.0
    return average[inverse], float((counts.astype("float64") ** 3 - counts).sum())


def _hanley_mcneil(effect: float, n1: int, n2: int) -> float:
    """Variance of A (an AUC) from n1 group and n2 rest samples (Hanley & McNeil 1982)."""
    q1 = effect / (2 - effect)
    q2 = 2 * effect * effect / (1 + effect)
    a2 = effect * effect
    return (effect * (1 - effect) + (n1 - 1) * (q1 - a2) + (n2 - 1) * (q2 - a2)) / (n1 * n2)


def compare(scores: np.ndarray, inside: np.ndarray, strata: np.ndarray | None = None) -> Comparison:
    """The group `inside` against the rest, within each stratum (`strata`: a label per score;
    None: one stratum). Strata where the group or the rest is empty are left out."""
    if strata is None:
        labels = np.zeros(len(scores), dtype=np.int64)
    else:
        labels = np.unique(strata, return_inverse=True)[1]
    u_sum = mean_sum = variance_sum = 0.0
    pairs = 0
    parts: list[tuple[float, int, int]] = []
    for label in np.unique(labels):
        members = labels == label
        group = inside[members]
        n1 = int(group.sum())
        n = int(members.sum())
        n2 = n - n1
        if n1 == 0 or n2 == 0:
            continue
        ranks, ties = _ranks(scores[members])
        u = float(ranks[group].sum()) - n1 * (n1 + 1) / 2.0
        u_sum += u
        mean_sum += n1 * n2 / 2.0
        variance_sum += n1 * n2 / 12.0 * ((n + 1) - ties / (n * (n - 1)))
        pairs += n1 * n2
        parts.append((u / (n1 * n2), n1, n2))
    if pairs == 0:
        return Comparison(0.5, 0.0, 1.0, 1.0, 0)
    effect = u_sum / pairs
    if variance_sum <= 0:
        return Comparison(effect, effect, effect, 1.0, pairs)
    z = (u_sum - mean_sum - 0.5) / math.sqrt(variance_sum)  # continuity-corrected, as scipy's
    spread = math.sqrt(sum((n1 * n2 / pairs) ** 2 * _hanley_mcneil(a, n1, n2) for a, n1, n2 in parts))
    low, high = max(0.0, effect - 1.96 * spread), min(1.0, effect + 1.96 * spread)
    return Comparison(effect, low, high, 0.5 * math.erfc(z / math.sqrt(2.0)), pairs)


def benjamini_hochberg(p_values: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q-values), in the input's order."""
    m = len(p_values)
    if m == 0:
        return p_values
    order = np.argsort(p_values)
    scaled = p_values[order] * m / np.arange(1, m + 1)
    adjusted = np.minimum.accumulate(scaled[::-1])[::-1]
    q = np.empty(m)
    q[order] = np.minimum(adjusted, 1.0)
    return q
