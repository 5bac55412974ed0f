"""Robust z-scores: how far a loss stands from the others, by their median and MAD.

Iglewicz & Hoaglin's modified z-score, z = (x - median) / (1.4826 * MAD): one bad batch or a few
huge losses cannot move the median or the MAD the way they move a mean and a standard deviation.
Shared by the live guard (which samples of a spike's batch stand out) and the offline analysis
(which samples stay above the others), so both judge with the same scale.
"""

from __future__ import annotations

import numpy as np

MAD_SCALE = 1.4826  # makes the MAD estimate the standard deviation of a normal distribution


def robust_z(values: np.ndarray, reference: np.ndarray, min_scale: float = 0.01) -> np.ndarray:
    """Modified z-score of `values` against `reference` (finite values only).

    The scale never goes below `min_scale` times the median, so a window of near-identical
    losses does not turn a tiny difference into a huge z.
    """
    median = float(np.median(reference))
    mad = float(np.median(np.abs(reference - median))) * MAD_SCALE
    scale = max(mad, min_scale * abs(median), 1e-9)
    result: np.ndarray = (values - median) / scale
    return result
