"""Samples whose loss stays far above the samples trained around the same steps.

Loss falls through training, so each occurrence is first put against the level of its own step:
its residual is log(loss / trend), the trend being a rolling median of the per-step medians. Then
against its own batch: the batch's median residual is taken off (batches of at least
`min_batch` finite losses), so a whole batch that rose together (an optimizer event, a bad
update, an fp16 overflow) cancels out and cannot make its samples look bad; only a sample that
stands out in its own batch does. Each residual then gets a robust z-score against the residuals
in a window of steps around it (`window` steps wide), z = (r - median) / (1.4826 * MAD)
(Iglewicz & Hoaglin's modified z-score; one bad batch cannot move the median or the MAD the way
it moves a mean and a standard deviation). A sample seen several times (across epochs) is judged
on the median of its occurrences' z-scores, so one unlucky batch does not condemn it, and a
sample that is always far above the rest is caught. Default threshold 3.5 is Iglewicz & Hoaglin's.

Occurrences at `excused_steps` (steps diagnosed as optimizer events: `fp16_overflow`,
`grad_explosion`, `lr_overshoot`, or a `single_rank` fault) are not counted against their samples
at all: they are reported as `excused` and the sample is judged on its other occurrences. PaLM's
authors found that the batches around their loss spikes trained without a spike from another
checkpoint: the spike came from data and model state together, not from "bad data" per se
(Chowdhery et al. 2022, "PaLM", section 5.1), so a sample in such a batch is not evidence.

NaN/inf losses are evidence of their own: a sample whose occurrences are mostly non-finite while
the rest of its batch was finite is flagged as `nonfinite_loss`. When most of a step's batch is
non-finite the step itself failed (fp16 overflow, a diverged optimizer) and its samples are not
blamed.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean import columns as C
from dataclean.feedback.robust import MAD_SCALE

VERDICT_SCHEMA = pa.schema(
    [
        (C.SAMPLE_ID, pa.string()),
        ("occurrences", pa.int64()),
        ("nonfinite", pa.int64()),
        ("excused", pa.int64()),
        (C.SCORE, pa.float64()),
        ("mean_loss", pa.float64()),
        ("level", pa.float64()),
        (C.FIRST_STEP, pa.int64()),
        (C.LAST_STEP, pa.int64()),
        ("flagged", pa.bool_()),
        (C.REASON, pa.string()),
    ]
)


def _trend(steps: np.ndarray, losses: np.ndarray, half: int) -> np.ndarray:
    """The loss level at each row's step: a rolling median (over `half` steps on each side) of the
    per-step median losses. It follows the fast fall of early training that a wide window blurs."""
    finite = np.isfinite(losses)
    unique, index = np.unique(steps, return_inverse=True)
    per_step = _group_median(index[finite], losses[finite], len(unique))
    known = np.isfinite(per_step)
    if not known.any():
        return np.full(len(steps), np.nan)
    per_step = np.interp(np.arange(len(unique)), np.flatnonzero(known), per_step[known])
    padded = np.pad(per_step, half, mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * half + 1)
    trend: np.ndarray = np.median(windows, axis=1)[index]
    return trend


def _window_stats(
    steps: np.ndarray, values: np.ndarray, window: int, min_rows: int
) -> tuple[np.ndarray, np.ndarray]:
    """Median and robust scale of the finite values within `window` steps around each row."""
    finite = np.isfinite(values)
    order = np.argsort(steps[finite], kind="stable")
    fsteps, fvalues = steps[finite][order], values[finite][order]
    medians = np.full(len(steps), np.nan)
    scales = np.full(len(steps), np.nan)
    if len(fsteps) == 0:
        return medians, scales
    half = max(window // 2, 1)
    stride = max(window // 4, 1)
    centers = np.arange(int(steps.min()), int(steps.max()) + stride, stride)
    global_median = float(np.median(fvalues))
    global_mad = float(np.median(np.abs(fvalues - global_median))) * MAD_SCALE
    center_median = np.empty(len(centers))
    center_scale = np.empty(len(centers))
    for i, center in enumerate(centers):
        lo = np.searchsorted(fsteps, center - half, "left")
        hi = np.searchsorted(fsteps, center + half, "right")
        if hi - lo >= min_rows:
            chunk = fvalues[lo:hi]
            median = float(np.median(chunk))
            center_median[i] = median
            center_scale[i] = float(np.median(np.abs(chunk - median))) * MAD_SCALE
        else:
            center_median[i], center_scale[i] = global_median, global_mad
    nearest = np.clip(np.rint((steps - centers[0]) / stride).astype(np.int64), 0, len(centers) - 1)
    return center_median[nearest], center_scale[nearest]


def _group_median(codes: np.ndarray, values: np.ndarray, groups: int) -> np.ndarray:
    """Median of `values` per group code (NaN for groups without values), vectorized."""
    result = np.full(groups, np.nan)
    if len(values) == 0:
        return result
    order = np.lexsort((values, codes))
    sorted_codes, sorted_values = codes[order], values[order]
    counts = np.bincount(sorted_codes, minlength=groups)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    present = counts > 0
    low = starts[present] + (counts[present] - 1) // 2
    high = starts[present] + counts[present] // 2
    result[present] = (sorted_values[low] + sorted_values[high]) / 2
    return result


def find_outliers(
    log: pa.Table,
    window: int = 200,
    z_threshold: float = 3.5,
    min_rows: int = 30,
    min_scale: float = 0.01,
    excused_steps: Collection[int] = (),
    min_batch: int = 8,
) -> pa.Table:
    """Judge every sample of a loss log; returns one row per sample (schema `VERDICT_SCHEMA`).

    `window`: width in steps of the reference around each occurrence. `min_rows`: a window with
    fewer finite losses falls back to the whole log. `min_scale`: floor of the robust scale of
    log(loss / level), i.e. a relative spread of 1%. Flagged rows carry reason `loss_outlier` or
    `nonfinite_loss`. `excused_steps`: steps whose occurrences are not counted (see above).
    `min_batch`: a step with fewer finite losses keeps its residuals against the trend only.
    """
    if log.num_rows == 0:
        return VERDICT_SCHEMA.empty_table()
    losses = log.column(C.LOSS).to_numpy(zero_copy_only=False).astype("float64")
    losses = np.where(pc.is_null(log.column(C.LOSS)).to_numpy(zero_copy_only=False), np.nan, losses)
    step_column = log.column(C.STEP)
    if step_column.null_count == len(step_column):
        steps = np.arange(log.num_rows, dtype=np.int64)  # no steps: row order stands in
    else:
        steps = pc.fill_null(step_column, -1).to_numpy().astype(np.int64)
    excused = np.isin(steps, np.asarray(list(excused_steps), dtype=np.int64))
    finite = np.isfinite(losses)

    # Non-finite losses on a step where most of the batch is non-finite blame the step.
    step_codes, step_index = np.unique(steps, return_inverse=True)
    step_nonfinite = np.bincount(step_index, weights=~finite, minlength=len(step_codes))
    step_rows = np.bincount(step_index, minlength=len(step_codes))
    batch_failed = (step_nonfinite / step_rows)[step_index] > 0.5
    isolated_nonfinite = ~finite & ~batch_failed & ~excused

    # Loss falls through training: compare each loss with the level at its own step (log ratio,
    # since the spread of losses scales with their level), then the ratios within the window.
    trend = _trend(steps, losses, max(window // 40, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        residual = np.log(np.maximum(losses, 1e-9)) - np.log(np.maximum(trend, 1e-9))
    residual[~finite] = np.nan
    # Against its own batch: a whole-batch shift cancels.
    batch_median = _group_median(step_index[finite], residual[finite], len(step_codes))
    batch_finite = np.bincount(step_index[finite], minlength=len(step_codes))
    offset = np.where(batch_finite >= min_batch, np.nan_to_num(batch_median), 0.0)
    residual -= offset[step_index]
    residual[excused] = np.nan
    medians, mads = _window_stats(steps, residual, window, min_rows)
    z = (residual - medians) / np.maximum(mads, min_scale)

    encoded = pc.dictionary_encode(log.column(C.SAMPLE_ID)).combine_chunks()
    codes = encoded.indices.to_numpy().astype(np.int64)
    names = encoded.dictionary
    groups = len(names)
    occurrences = np.bincount(codes, minlength=groups)
    nonfinite = np.bincount(codes, weights=isolated_nonfinite, minlength=groups).astype(np.int64)
    counted = finite & ~excused
    excused_count = np.bincount(codes, weights=excused, minlength=groups).astype(np.int64)
    score = _group_median(codes[counted], z[counted], groups)
    level = _group_median(codes[finite], trend[finite], groups)
    finite_count = np.bincount(codes[finite], minlength=groups)
    loss_sum = np.bincount(codes[finite], weights=losses[finite], minlength=groups)
    mean_loss = np.divide(loss_sum, finite_count, out=np.full(groups, np.nan), where=finite_count > 0)
    first = np.full(groups, np.iinfo(np.int64).max)
    last = np.full(groups, np.iinfo(np.int64).min)
    np.minimum.at(first, codes, steps)
    np.maximum.at(last, codes, steps)

    by_nonfinite = (nonfinite > 0) & (nonfinite * 2 >= occurrences - excused_count)
    by_loss = np.nan_to_num(score, nan=-np.inf) >= z_threshold
    flagged = by_nonfinite | by_loss
    reasons = [
        "nonfinite_loss" if nonfinite_flag else "loss_outlier" if loss_flag else None
        for nonfinite_flag, loss_flag in zip(by_nonfinite, by_loss, strict=True)
    ]
    score = np.where(by_nonfinite & ~by_loss, np.inf, score)
    return pa.Table.from_arrays(
        [
            names.cast(pa.string()),
            pa.array(occurrences, pa.int64()),
            pa.array(nonfinite, pa.int64()),
            pa.array(excused_count, pa.int64()),
            pa.array(score, pa.float64(), from_pandas=True),
            pa.array(mean_loss, pa.float64(), from_pandas=True),
            pa.array(level, pa.float64(), from_pandas=True),
            pa.array(first, pa.int64()),
            pa.array(last, pa.int64()),
            pa.array(flagged, pa.bool_()),
            pa.array(reasons, pa.string()),
        ],
        schema=VERDICT_SCHEMA,
    )
