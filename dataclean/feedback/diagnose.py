"""Why did the loss spike? Practitioners' rules applied to the step log and the spike's batch.

Rules, checked in this order (the first that fits names the spike):
- `fp16_overflow`: the loss scale fell within a few steps of the spike (a dynamic loss scaler
  halves it when gradients overflow).
- `grad_explosion`: the gradient norm was already rising over the steps before the spike (the
  optimizer or learning rate is driving the model out of its basin; the spike is the symptom).
- `data`: the batch's typical sample was normal and a few samples stood out far above it (or, with
  no per-sample losses, the grad norm was normal before the jump): the data is to blame.
- `single_rank`: one rank's samples were all high while the other ranks' were normal: that rank's
  data shard or node (hardware, communication), not the model.
- `lr_overshoot`: the whole batch rose together and the learning rate had just reached its peak.
- `unknown`: none of the above could be shown; the evidence says what was missing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.feedback import schema as S
from dataclean.feedback.monitor import SpikeEvent
from dataclean.feedback.outliers import robust_z

DIAGNOSES = ("grad_explosion", "fp16_overflow", "data", "lr_overshoot", "single_rank", "unknown")

ACTIONS = {
    "fp16_overflow": "Skip or redo the step from the last checkpoint; if the scale keeps falling, "
    "lower the learning rate or train in bf16.",
    "grad_explosion": "Rewind to a checkpoint before the rise, lower the learning rate or tighten "
    "gradient clipping, and watch the grad norm.",
    "data": "Quarantine the blamed samples (done in quarantine.parquet), rewind to a checkpoint "
    "before the spike and skip this batch.",
    "single_rank": "Inspect that rank: its data shard (the samples listed) and its node "
    "(hardware errors, communication timeouts).",
    "lr_overshoot": "Lower the peak learning rate or lengthen the warmup; rewind to before the peak.",
    "unknown": "Read the evidence; log the missing columns (grad_norm, lr, loss_scale, per-sample "
    "losses with rank) so the next spike can be diagnosed.",
}


@dataclass
class Spike:
    """A spike with its diagnosis, the evidence for it, and the samples it blames."""

    step: int
    loss: float
    level: float
    diagnosis: str
    evidence: list[str] = field(default_factory=list)
    action: str = ""
    sample_ids: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


@dataclass
class DiagnosisRules:
    """Thresholds of the rules. `lookback`: steps before the spike examined for a rising grad
    norm or a falling loss scale; `baseline`: steps before those that define normal."""

    lookback: int = 10
    baseline: int = 100
    grad_rise: float = 2.0
    blame_z: float = 3.5
    blame_ratio: float = 1.5
    batch_normal: float = 1.5
    lr_peak: float = 0.9


def _series(steps: pa.Table, column: str) -> np.ndarray:
    values = steps.column(column)
    series: np.ndarray = pc.fill_null(values.cast(pa.float64()), math.nan).to_numpy()
    return series


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def blame_samples(ids: list[str], losses: np.ndarray, rules: DiagnosisRules, level: float) -> list[str]:
    """Samples of one batch whose loss stands out in that batch (robust z and a ratio)."""
    finite = np.isfinite(losses)
    if finite.sum() >= 4:
        z = robust_z(losses[finite], losses[finite])
        median = float(np.median(losses[finite]))
        out = (z >= rules.blame_z) & (losses[finite] >= rules.blame_ratio * median)
        picked = np.asarray(ids, dtype=object)[finite][out]
    else:  # a tiny batch: compare with the recent level instead
        picked = np.asarray(ids, dtype=object)[finite & (losses >= 3 * level)]
    blamed = list(dict.fromkeys(str(i) for i in picked))
    nonfinite = [str(i) for i, ok in zip(ids, finite, strict=True) if not ok]
    if nonfinite and finite.any():  # NaN on some samples of a finite batch: blame them too
        blamed += [i for i in nonfinite if i not in blamed]
    return blamed


def diagnose(
    event: SpikeEvent,
    steps: pa.Table,
    batch: pa.Table | None,
    rules: DiagnosisRules | None = None,
) -> Spike:
    """Diagnose one spike from the step log (`steps`, sorted by step) and its batch's rows of the
    per-sample loss log (`batch`, or None when that step has no per-sample losses)."""
    rules = rules or DiagnosisRules()
    spike = Spike(step=event.step, loss=event.loss, level=event.level, diagnosis="unknown")
    evidence = spike.evidence
    step_values = steps.column(S.STEP).to_numpy()
    index = int(np.searchsorted(step_values, event.step))
    known = {c: bool(np.isfinite(_series(steps, c)).any()) for c in (S.LR, S.GRAD_NORM, S.LOSS_SCALE)}
    spike.missing = [column for column, ok in known.items() if not ok]
    if not math.isfinite(event.loss):
        evidence.append(f"the step loss is {event.loss}")
    else:
        evidence.append(f"loss {_fmt(event.loss)} against a recent level of {_fmt(event.level)}")

    def decide(name: str) -> Spike:
        spike.diagnosis = name
        spike.action = ACTIONS[name]
        return spike

    if known[S.LOSS_SCALE]:
        scale = _series(steps, S.LOSS_SCALE)
        lo, hi = max(index - rules.lookback, 1), min(index + 2, len(scale))
        for i in range(lo, hi):
            if scale[i] < scale[i - 1]:
                evidence.append(
                    f"loss scale fell from {_fmt(scale[i - 1])} to {_fmt(scale[i])} at step {step_values[i]}"
                )
                return decide("fp16_overflow")
        evidence.append("loss scale steady")

    grad_normal = False
    if known[S.GRAD_NORM]:
        grad = _series(steps, S.GRAD_NORM)
        before = grad[max(index - rules.lookback, 0) : index]
        base = grad[max(index - rules.lookback - rules.baseline, 0) : max(index - rules.lookback, 0)]
        before, base = before[np.isfinite(before)], base[np.isfinite(base)]
        if len(before) >= 3 and len(base) >= 3:
            recent = float(np.median(before[-3:]))
            normal = float(np.median(base))
            slope = float(np.polyfit(np.arange(len(before)), before, 1)[0])
            if recent >= rules.grad_rise * normal and slope > 0:
                evidence.append(
                    f"grad norm rose from {_fmt(normal)} to {_fmt(recent)} over the "
                    f"{len(before)} steps before the spike"
                )
                return decide("grad_explosion")
            grad_normal = True
            evidence.append(f"grad norm normal before the spike ({_fmt(recent)} vs {_fmt(normal)})")
        else:
            evidence.append("too few steps before the spike to judge the grad norm")

    lr_at_peak = False
    if known[S.LR]:
        lr = _series(steps, S.LR)
        upto = lr[: index + 1]
        peak = float(np.nanmax(upto))
        reached = int(np.argmax(upto >= rules.lr_peak * peak))
        lr_at_peak = bool(
            upto[-1] >= rules.lr_peak * peak and index - reached <= rules.baseline and reached > 0
        )
        if lr_at_peak:
            evidence.append(
                f"lr {_fmt(float(upto[-1]))} is at its peak {_fmt(peak)}, reached at step "
                f"{step_values[reached]}"
            )

    if batch is None or batch.num_rows == 0:
        spike.missing.append("per-sample losses at this step")
        if lr_at_peak:
            return decide("lr_overshoot")
        if grad_normal:
            evidence.append("no per-sample losses at this step: the samples cannot be named")
            return decide("data")
        return decide("unknown")

    ids = [str(i) for i in batch.column(S.SAMPLE_ID).to_pylist()]
    losses = pc.fill_null(batch.column(S.LOSS), math.nan).to_numpy(zero_copy_only=False)
    finite = losses[np.isfinite(losses)]
    nonfinite = len(losses) - len(finite)
    if nonfinite:
        evidence.append(f"{nonfinite} of {len(losses)} samples had a non-finite loss")
    batch_median = float(np.median(finite)) if len(finite) else math.nan
    typical_normal = len(finite) > 0 and batch_median <= rules.batch_normal * event.level

    rank = _single_rank(batch, losses, rules, event.level)
    if rank is not None:
        worst, worst_median, others_median, others = rank
        evidence.append(
            f"rank {worst}: all its samples high (median {_fmt(worst_median)}) against "
            f"{_fmt(others_median)} on the other {others} ranks"
        )
        rank_values = pc.fill_null(batch.column(S.RANK), -1).to_numpy()
        spike.sample_ids = [i for i, r in zip(ids, rank_values, strict=True) if r == worst]
        return decide("single_rank")
    if batch.column(S.RANK).null_count == batch.num_rows:
        spike.missing.append("rank")

    blamed = blame_samples(ids, losses, rules, event.level)
    if typical_normal and blamed:
        top = float(np.nanmax(np.where(np.isfinite(losses), losses, np.nan)))
        evidence.append(
            f"batch median {_fmt(batch_median)} is normal; {len(blamed)} of {len(ids)} samples "
            f"stand out (up to {_fmt(top)})"
        )
        spike.sample_ids = blamed
        return decide("data")

    if not typical_normal and len(finite):
        evidence.append(f"the whole batch rose (median {_fmt(batch_median)})")
        if lr_at_peak:
            return decide("lr_overshoot")
    return decide("unknown")


def _single_rank(
    batch: pa.Table, losses: np.ndarray, rules: DiagnosisRules, level: float
) -> tuple[int, float, float, int] | None:
    """(rank, its median, the others' median, how many others) when one rank's samples are all
    high while the other ranks' are normal; None otherwise (or without rank information)."""
    ranks = batch.column(S.RANK)
    if ranks.null_count == len(ranks) or len(pc.unique(ranks.drop_null())) < 2:
        return None
    rank_values = pc.fill_null(ranks, -1).to_numpy()
    finite = np.isfinite(losses)
    per_rank = {
        int(r): losses[(rank_values == r) & finite]
        for r in np.unique(rank_values)
        if r >= 0 and ((rank_values == r) & finite).any()
    }
    if len(per_rank) < 2:
        return None
    medians = {r: float(np.median(v)) for r, v in per_rank.items()}
    worst = max(medians, key=lambda r: medians[r])
    others = float(np.median([m for r, m in medians.items() if r != worst]))
    high = per_rank[worst] >= rules.blame_ratio * others
    if (
        others <= rules.batch_normal * level
        and medians[worst] >= 2 * others
        and len(per_rank[worst]) >= 2
        and bool(high.all())
    ):
        return worst, medians[worst], others, len(per_rank) - 1
    return None
