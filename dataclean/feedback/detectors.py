"""Why did the loss spike? Practitioners' rules applied to the step log and the spike's batch.

Rules, checked in this order (the first that fits names the spike):
- `single_rank`: one rank's samples were all high while the other ranks' were normal: that rank's
  node (hardware, communication) or data shard, not the model; the samples are listed to inspect.
- `data`: up to about half of the batch stood far above its clean part, and without them the
  batch is back in its pre-spike band (`dataclean.feedback.blame`): they explain the spike,
  whatever the optimizer's signals did at that step (a few huge losses also make the grad norm
  jump and can overflow an fp16 scaler).
- `fp16_overflow`: the dynamic loss scale fell within `scale_window` steps of the spike. A scaler
  halves the scale and skips the step when the gradients overflow (Micikevicius et al. 2018,
  "Mixed Precision Training"; PyTorch `GradScaler`); OPT-175B's logbook tied its divergences to
  the loss scale crashing (Zhang et al. 2022, "OPT", section 2.5).
- `grad_explosion`, from a climb: the grad norm over the `lookback` steps before the spike is at
  least `grad_rise` times, and `grad_z` robust z-scores above, its baseline: the median/MAD of
  the steps since warm-up ended, or of the last `grad_baseline` steps if fewer. A long robust
  baseline is what catches a slow creep (grad norm 2 -> 4 over ~200 steps at peak lr, then the
  spike): a baseline of the last hundred steps already sits inside the climb. Grad-norm surges
  around loss spikes are what OPT's and BLOOM's training logbooks record, and what "Spike No
  More" (Takase et al. 2023) and "A Theory on Adam Instability in Large-Scale Machine Learning"
  (Molybog et al. 2023) study as the spikes' mechanism.
- `lr_overshoot`: the whole batch rose together and the lr had reached its peak within
  `baseline` steps: instability that grows with the learning rate and that a longer warm-up or a
  lower peak removes (Wortsman et al. 2023, "Small-scale proxies for large-scale Transformer
  training instabilities").
- `grad_explosion`, from a jump: the whole batch rose and the spike step's own grad norm is at
  least `grad_jump` times its baseline: the update before it broke the model. (A jump without
  per-sample losses cannot be told from a few bad samples: that stays `unknown`.)
- `data` without per-sample losses: the grad norm was normal before and at the spike, so the
  optimizer is not to blame, but the samples cannot be named.
- `unknown`: none of the above could be shown; the evidence says what was missing.

Spikes diagnosed as one of `EXCUSED` never convict samples: their batches' losses are not counted
against the samples in them (`analyze`, `outliers.find_outliers`). PaLM's authors rewound ~100
steps and skipped 200-500 batches around each spike, and found that the same batches fed to an
earlier checkpoint did not spike: spikes came from data and model state together, not from "bad
data" per se (Chowdhery et al. 2022, "PaLM", section 5.1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean import columns as C
from dataclean.feedback.blame import blame_samples
from dataclean.feedback.monitor import SpikeEvent
from dataclean.feedback.robust import MAD_SCALE

DIAGNOSES = ("grad_explosion", "fp16_overflow", "data", "lr_overshoot", "single_rank", "unknown")
OPTIMIZER_EVENTS = frozenset({"fp16_overflow", "grad_explosion", "lr_overshoot"})
# Spikes whose batch's losses are not counted against its samples: the optimizer or a node is to
# blame, not the data.
EXCUSED = OPTIMIZER_EVENTS | {"single_rank"}

SPIKE_ADVICE = {
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
    """Thresholds of the rules (see the module docstring).

    `lookback`: steps before the spike whose grad norm is compared with the baseline.
    `baseline`: how recently the lr must have reached its peak for `lr_overshoot`.
    `grad_baseline`: longest baseline of the grad norm, in steps (since warm-up if shorter).
    `grad_rise`, `grad_z`: how far above its baseline the recent grad norm must be (ratio of the
    medians, and robust z against the baseline's median/MAD). `grad_jump`: ratio of the spike
    step's grad norm to the baseline. `scale_window`: steps either side of the spike in which a
    falling loss scale counts. `blame_quantile`: the floor a blamed sample must clear, as a
    quantile of the per-sample losses of the steps before the spike; `blame_z`, `blame_ratio`:
    the floor without them (robust z and times the median of the samples below it in its batch);
    `blame_share`: the ceiling, a share of the batch (`dataclean.feedback.blame`).
    `batch_normal`: a median of the rest of a batch up to this many times the recent level is
    normal (and the band when a spike carries none). `lr_peak`: fraction of the peak lr that
    counts as at the peak.
    """

    lookback: int = 10
    baseline: int = 100
    grad_baseline: int = 1000
    grad_rise: float = 2.0
    grad_z: float = 3.5
    grad_jump: float = 4.0
    scale_window: int = 2
    blame_z: float = 3.5
    blame_ratio: float = 1.5
    blame_share: float = 0.6
    blame_quantile: float = 0.99
    batch_normal: float = 1.5
    lr_peak: float = 0.9


def _series(steps: pa.Table, column: str) -> np.ndarray:
    values = steps.column(column)
    series: np.ndarray = pc.fill_null(values.cast(pa.float64()), math.nan).to_numpy()
    return series


def _fmt(value: float) -> str:
    return f"{value:.4g}"


@dataclass
class _Grad:
    """What the grad norm says about a spike."""

    climb: bool = False
    jump: bool = False
    normal: bool = False
    evidence: list[str] = field(default_factory=list)


def warmup_end(lr: np.ndarray, rules: DiagnosisRules) -> int | None:
    """Index of the first step at which the lr reached `lr_peak` of its highest value."""
    finite = np.isfinite(lr)
    if not finite.any():
        return None
    return int(np.argmax(np.where(finite, lr, -np.inf) >= rules.lr_peak * float(np.nanmax(lr))))


def _grad_signals(
    grad: np.ndarray, step_values: np.ndarray, index: int, warm: int | None, rules: DiagnosisRules
) -> _Grad:
    """Climb before the spike and jump at it, against a long robust baseline (module docstring)."""
    found = _Grad()
    end = max(index - rules.lookback, 0)
    start = max(index - rules.grad_baseline, 0)
    if warm is not None and warm < end - rules.lookback:
        start = max(start, warm)
    base = grad[start:end]
    base = base[np.isfinite(base)]
    before = grad[end:index]
    before = before[np.isfinite(before)]
    if len(base) < rules.lookback or len(before) < 3:
        found.evidence.append("too few steps before the spike to judge the grad norm")
        reference = float(np.median(before)) if len(before) else math.nan
    else:
        reference = float(np.median(base))
        mad = float(np.median(np.abs(base - reference))) * MAD_SCALE
        scale = max(mad, 0.05 * reference, 1e-12)
        recent = float(np.median(before))
        span = f"steps {step_values[start]}-{step_values[end - 1]}"
        if recent >= rules.grad_rise * reference and (recent - reference) / scale >= rules.grad_z:
            window = grad[start:index]
            calm = np.flatnonzero(np.isfinite(window) & (window <= reference + 2 * scale))
            since = step_values[start + int(calm[-1]) + 1] if len(calm) else step_values[start]
            found.climb = True
            found.evidence.append(
                f"grad norm rose from {_fmt(reference)} (median of {span}) to {_fmt(recent)} over the "
                f"{len(before)} steps before the spike, climbing since step {since}"
            )
        else:
            found.normal = True
            found.evidence.append(
                f"grad norm normal before the spike ({_fmt(recent)} vs {_fmt(reference)}, median of {span})"
            )
    at_spike = float(grad[index]) if index < len(grad) else math.nan
    usable = math.isfinite(at_spike) and math.isfinite(reference) and reference > 0
    if usable and at_spike >= rules.grad_jump * reference:
        found.jump = True
        found.normal = False
        found.evidence.append(
            f"grad norm {_fmt(at_spike)} at the spike step, {at_spike / reference:.1f}x its baseline"
        )
    return found


def diagnose(
    event: SpikeEvent,
    steps: pa.Table,
    batch: pa.Table | None,
    rules: DiagnosisRules | None = None,
    recent: np.ndarray | None = None,
) -> Spike:
    """Diagnose one spike from the step log (`steps`, sorted by step) and its batch's rows of the
    per-sample loss log (`batch`, or None when that step has no per-sample losses); `recent`: the
    per-sample losses of the steps before it (the blame's floor; None: judged within the batch)."""
    rules = rules or DiagnosisRules()
    spike = Spike(step=event.step, loss=event.loss, level=event.level, diagnosis="unknown")
    evidence = spike.evidence
    step_values = steps.column(C.STEP).to_numpy()
    index = int(np.searchsorted(step_values, event.step))
    known = {c: bool(np.isfinite(_series(steps, c)).any()) for c in (C.LR, C.GRAD_NORM, C.LOSS_SCALE)}
    spike.missing = [column for column, ok in known.items() if not ok]
    if not math.isfinite(event.loss):
        evidence.append(f"the step loss is {event.loss}")
    else:
        evidence.append(f"loss {_fmt(event.loss)} against a recent level of {_fmt(event.level)}")

    def decide(name: str) -> Spike:
        spike.diagnosis = name
        spike.action = SPIKE_ADVICE[name]
        return spike

    # The optimizer's signals.
    scale_fell = None
    if known[C.LOSS_SCALE]:
        scale = _series(steps, C.LOSS_SCALE)
        lo = max(index - rules.scale_window, 1)
        hi = min(index + rules.scale_window + 1, len(scale))
        for i in range(lo, hi):
            if scale[i] < scale[i - 1]:
                scale_fell = (
                    f"loss scale fell from {_fmt(scale[i - 1])} to {_fmt(scale[i])} at step {step_values[i]}"
                )
                break
    lr = _series(steps, C.LR) if known[C.LR] else None
    warm = warmup_end(lr, rules) if lr is not None else None
    grad = (
        _grad_signals(_series(steps, C.GRAD_NORM), step_values, index, warm, rules)
        if known[C.GRAD_NORM]
        else None
    )
    lr_at_peak = None
    if lr is not None:
        upto = lr[: index + 1]
        peak = float(np.nanmax(upto))
        reached = int(np.argmax(upto >= rules.lr_peak * peak))
        if upto[-1] >= rules.lr_peak * peak and index - reached <= rules.baseline and reached > 0:
            lr_at_peak = (
                f"lr {_fmt(float(upto[-1]))} is at its peak {_fmt(peak)}, reached at step "
                f"{step_values[reached]}"
            )

    # The batch.
    whole_batch = batch is None or batch.num_rows == 0
    if batch is not None and batch.num_rows:
        ids = [str(i) for i in batch.column(C.SAMPLE_ID).to_pylist()]
        losses = pc.fill_null(batch.column(C.LOSS), math.nan).to_numpy(zero_copy_only=False)
        finite = np.isfinite(losses)
        if (~finite).any():
            evidence.append(f"{int((~finite).sum())} of {len(losses)} samples had a non-finite loss")
        rank = _single_rank(batch, losses, rules, event.level)
        if rank is not None:
            worst, worst_median, others_median, others = rank
            evidence.append(
                f"rank {worst}: all its samples high (median {_fmt(worst_median)}) against "
                f"{_fmt(others_median)} on the other {others} ranks"
            )
            rank_values = pc.fill_null(batch.column(C.RANK), -1).to_numpy()
            spike.sample_ids = [i for i, r in zip(ids, rank_values, strict=True) if r == worst]
            return decide("single_rank")
        if batch.column(C.RANK).null_count == batch.num_rows:
            spike.missing.append("rank")
        normal = rules.batch_normal * event.level
        target = event.band if math.isfinite(event.band) else normal
        blame = blame_samples(
            ids,
            losses,
            event.level,
            target,
            recent,
            z=rules.blame_z,
            ratio=rules.blame_ratio,
            share=rules.blame_share,
            quantile=rules.blame_quantile,
        )
        if not math.isfinite(event.loss) and finite.any() and not finite.all():
            # A non-finite step loss is explained by the non-finite samples alone: the rest need
            # only be normal, not back in the band (a finite batch's mean says nothing of it).
            blame.sample_ids = [i for i, ok in zip(ids, finite, strict=True) if not ok]
            blame.target = normal
            rest = losses[finite]
            blame.rest_mean, blame.rest_median = float(rest.mean()), float(np.median(rest))
        median = float(np.median(losses[finite])) if finite.any() else math.nan
        if blame.explains and blame.rest_median <= normal:
            top = float(np.nanmax(np.where(finite, losses, np.nan))) if finite.any() else math.nan
            evidence.append(
                f"{len(blame.sample_ids)} of {len(ids)} samples listed (up to {_fmt(top)}; floor "
                f"{_fmt(blame.floor)}; the others' median {_fmt(blame.reference)}); without "
                f"them the batch averages {_fmt(blame.rest_mean)}, inside the pre-spike band "
                f"(<= {_fmt(blame.target)})"
            )
            signals = [scale_fell] if scale_fell else []
            signals += [grad.evidence[-1]] if grad is not None and grad.jump else []
            if signals:
                evidence.append(
                    "the optimizer's signals at this step follow from these samples' losses: "
                    + "; ".join(signals)
                )
            spike.sample_ids = blame.sample_ids
            return decide("data")
        if blame.sample_ids and finite.any():
            evidence.append(
                f"{len(blame.sample_ids)} of {len(ids)} samples stand out, but without them the batch "
                f"still averages {_fmt(blame.rest_mean)} (band <= {_fmt(blame.target)})"
            )
        if finite.any():
            evidence.append(f"the whole batch rose (median {_fmt(median)})")
            whole_batch = True
        else:
            evidence.append("no sample of the batch had a finite loss: the step itself failed")
            whole_batch = True
    else:
        spike.missing.append("per-sample losses at this step")

    if scale_fell:
        evidence.append(scale_fell)
        return decide("fp16_overflow")
    if known[C.LOSS_SCALE]:
        evidence.append("loss scale steady")
    if grad is not None:
        evidence.extend(grad.evidence)
        if grad.climb:
            return decide("grad_explosion")
    if lr_at_peak and whole_batch:
        evidence.append(lr_at_peak)
        return decide("lr_overshoot")
    has_batch = batch is not None and batch.num_rows > 0
    if grad is not None and grad.jump:
        if has_batch:
            return decide("grad_explosion")
        evidence.append("without per-sample losses a grad-norm jump cannot be told from a few bad samples")
        return decide("unknown")
    if not has_batch and grad is not None and grad.normal:
        evidence.append("no per-sample losses at this step: the samples cannot be named")
        return decide("data")
    return decide("unknown")


def _single_rank(
    batch: pa.Table, losses: np.ndarray, rules: DiagnosisRules, level: float
) -> tuple[int, float, float, int] | None:
    """(rank, its median, the others' median, how many others) when one rank's samples are all
    high while the other ranks' are normal; None otherwise (or without rank information)."""
    ranks = batch.column(C.RANK)
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
