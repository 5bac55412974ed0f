"""After a loss spike: watch for recovery or roll back, then resume at a lower lr and ramp it back.

The rule practitioners follow after a spike (PaLM, Chowdhery et al. 2022, sec. 5.1: restart from
a checkpoint about 100 steps before the spike and skip the batches around it; OPT's logbook, Zhang
et al. 2022: roll back to an earlier checkpoint and lower the learning rate; BLOOM's chronicles):

- watch: keep training for `watch_steps` steps. The run has recovered when the median loss of its
  last `settle_steps` steps is back in the pre-spike band: at most the `band_quantile` quantile
  of the detector's window before the spike (its own noise sets the band, no fixed margin). Then
  carry on and record it. If it has not recovered by the end of the window, or a second spike
  comes first, roll back.
- rollback: restore the last checkpoint before the spike (the caller's job: model, optimizer,
  scheduler, sampler, RNG; the spike's blamed samples are on the quarantine list, so the replay
  skips them) and continue at `lr_factor` times the schedule's lr (0.1-0.3x is the usual advice);
  once the loss has been in the band for `settle_steps` steps in a row, ramp the factor linearly
  back to 1 over `ramp_steps` steps. At most `max_rollbacks` rollbacks per run; then stop.

`Recovery` holds that state between steps and returns a `Decision` whenever it decides something,
with the reason, for the incident log. Shared by the in-process guard (`TrainingGuard`) and the
outer loop (`dataclean supervise`). No torch here; `LrScale` scales an optimizer's lr through its
step hooks (duck-typed).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import numpy as np

from dataclean.errors import ConfigError

# Set by `dataclean supervise` on a relaunch after a rollback: the lr factor to resume at and the
# top of the pre-spike loss band the loss must settle in before the factor ramps back.
LR_FACTOR_ENV = "DATACLEAN_LR_FACTOR"
LOSS_BAND_ENV = "DATACLEAN_LOSS_BAND"
RAMP_STEPS_ENV = "DATACLEAN_LR_RAMP_STEPS"
SETTLE_STEPS_ENV = "DATACLEAN_SETTLE_STEPS"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class Playbook:
    """The settings of the recover-or-roll-back rule (see the module docstring)."""

    lr_factor: float = 0.2
    ramp_steps: int = 100
    watch_steps: int = 100
    settle_steps: int = 10
    band_quantile: float = 0.9
    max_rollbacks: int = 3

    def __post_init__(self) -> None:
        if not 0 < self.lr_factor <= 1:
            raise ConfigError(f"playbook.lr_factor: must be in (0, 1], got {self.lr_factor}")
        for name in ("ramp_steps", "watch_steps", "settle_steps", "max_rollbacks"):
            if getattr(self, name) < (0 if name in ("ramp_steps", "max_rollbacks") else 1):
                raise ConfigError(f"playbook.{name}: too small, got {getattr(self, name)}")
        if self.settle_steps > self.watch_steps:
            raise ConfigError("playbook.settle_steps: must not exceed watch_steps")
        if not 0 < self.band_quantile <= 1:
            raise ConfigError(f"playbook.band_quantile: must be in (0, 1], got {self.band_quantile}")


@dataclass
class Decision:
    """One decision of the playbook, as the incident log records it.

    `decision`: `watch` (a spike is being watched), `recovered`, `rollback`, `stop` (a rollback
    was due but impossible), `ramp` (the lr factor starts back to the schedule), `schedule` (the
    lr is the schedule's again). `why` says what the decision rests on.
    """

    step: int
    decision: str
    why: str
    spike_step: int | None = None
    checkpoint: str | None = None
    checkpoint_step: int | None = None
    lr_factor: float | None = None
    event: str = "decision"
    time: str = field(default_factory=_now)


@dataclass
class _Watch:
    spike_step: int
    band: float
    losses: list[float] = field(default_factory=list)


def band_top(window: Sequence[float] | np.ndarray, quantile: float) -> float:
    """The top of the pre-spike band: the `quantile` of the detector's recent (non-spike) losses."""
    values = np.asarray(window, dtype="float64")
    values = values[np.isfinite(values)]
    return float(np.quantile(values, quantile)) if len(values) else float("inf")


class Recovery:
    """The playbook's state between steps: the spike being watched and the lr factor after a
    rollback. The caller reports spikes (`watch`, `second_spike`) and every other step's loss
    (`observe`), performs the rollbacks it is told to and reports them (`rolled_back`)."""

    def __init__(self, playbook: Playbook | None = None) -> None:
        self.playbook = playbook or Playbook()
        self.watched: _Watch | None = None
        self.band: float | None = None  # the band the lr factor's settling is judged against
        self.phase: str | None = None  # None (on schedule), "hold" or "ramp"
        self.ramp_start = 0
        self.in_band = 0
        self.rollbacks = 0

    def watch(self, step: int, window: Sequence[float] | np.ndarray) -> Decision:
        """Start watching the spike at `step`; `window` is the detector's window before it."""
        band = band_top(window, self.playbook.band_quantile)
        self.watched = _Watch(step, band)
        return Decision(
            step,
            "watch",
            f"spike at step {step}: watching {self.playbook.watch_steps} steps for the median loss of "
            f"{self.playbook.settle_steps} steps to return to the pre-spike band (<= {band:.4g}, the "
            f"{self.playbook.band_quantile:g} quantile of the detector's window before the spike)",
            spike_step=step,
        )

    def second_spike(self, step: int) -> Decision | None:
        """A spike while one is watched: the rule says roll back (None when nothing is watched)."""
        if self.watched is None:
            return None
        first = self.watched.spike_step
        return Decision(
            step,
            "rollback",
            f"second spike at step {step} while watching the spike at step {first}",
            spike_step=first,
        )

    def observe(self, step: int, loss: float) -> Decision | None:
        """Judge a step that was not a spike: the watch's end, the lr factor's settling and ramp."""
        if self.watched is not None:
            watch = self.watched
            watch.losses.append(loss)
            if step - watch.spike_step < self.playbook.watch_steps:
                return None
            recent = float(np.median(watch.losses[-self.playbook.settle_steps :]))
            self.watched = None
            settle = self.playbook.settle_steps
            if recent <= watch.band:
                return Decision(
                    step,
                    "recovered",
                    f"median loss of the last {settle} steps {recent:.4g} is back in the pre-spike "
                    f"band (<= {watch.band:.4g}) {step - watch.spike_step} steps after the spike",
                    spike_step=watch.spike_step,
                )
            return Decision(
                step,
                "rollback",
                f"not recovered {step - watch.spike_step} steps after the spike: median loss of the "
                f"last {settle} steps {recent:.4g} above the pre-spike band (<= {watch.band:.4g})",
                spike_step=watch.spike_step,
            )
        if self.phase == "hold" and self.band is not None:
            self.in_band = self.in_band + 1 if loss <= self.band else 0
            if self.in_band >= self.playbook.settle_steps:
                self.phase, self.ramp_start = "ramp", step
                if self.playbook.ramp_steps == 0:
                    self.phase = None
                return Decision(
                    step,
                    "ramp" if self.phase else "schedule",
                    f"the loss has been in the pre-spike band (<= {self.band:.4g}) for "
                    f"{self.in_band} steps: lr factor {self.playbook.lr_factor:g} ramps back to the "
                    f"schedule over {self.playbook.ramp_steps} steps",
                    lr_factor=self.playbook.lr_factor,
                )
        elif self.phase == "ramp" and step - self.ramp_start >= self.playbook.ramp_steps:
            self.phase = None
            why = "the ramp is done: the lr is the schedule's again"
            return Decision(step, "schedule", why, lr_factor=1.0)
        return None

    def rolled_back(self, spike_step: int, band: float | None = None) -> None:
        """The caller restored a checkpoint because of the spike at `spike_step`: hold the lr
        factor until the loss settles in `band` (the watched spike's band when None)."""
        if band is None and self.watched is not None:
            band = self.watched.band
        self.watched = None
        self.band = band
        self.phase = "hold"
        self.in_band = 0
        self.rollbacks += 1

    def resume(self, playbook: Playbook, band: float | None) -> None:
        """Start held at `playbook.lr_factor` (a process relaunched after a rollback by `dataclean
        supervise`); without a band the factor ramps back after `settle_steps` steps."""
        self.playbook = playbook
        self.band = float("inf") if band is None else band
        self.phase, self.in_band = "hold", 0

    def factor(self, step: int) -> float:
        """The lr factor for `step`'s update: 1 on schedule, `lr_factor` held, then a linear ramp."""
        low = self.playbook.lr_factor
        if self.phase == "hold":
            return low
        if self.phase == "ramp":
            done = min(1.0, (step - self.ramp_start) / max(1, self.playbook.ramp_steps))
            return low + (1.0 - low) * done
        return 1.0

    def can_roll_back(self) -> bool:
        return self.rollbacks < self.playbook.max_rollbacks


def _env_number(name: str) -> float | None:
    value = os.environ.get(name)
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        raise ConfigError(f"{name}: {value!r} is not a number") from None


def resume_from_env(playbook: Playbook) -> tuple[Playbook, float | None] | None:
    """The playbook a run relaunched by `dataclean supervise` resumes with (its lr factor, ramp
    and settle steps from the environment) and the loss band, or None when not relaunched."""
    factor = _env_number(LR_FACTOR_ENV)
    if factor is None or factor == 1:
        return None
    ramp, settle = _env_number(RAMP_STEPS_ENV), _env_number(SETTLE_STEPS_ENV)
    changes: dict[str, Any] = {"lr_factor": factor}
    if ramp is not None:
        changes["ramp_steps"] = int(ramp)
    if settle is not None:
        changes["settle_steps"] = int(settle)
        changes["watch_steps"] = max(playbook.watch_steps, int(settle))
    try:
        resumed = Playbook(**{**playbook.__dict__, **changes})
    except ConfigError as error:
        raise ConfigError(f"{LR_FACTOR_ENV} and the rest from dataclean supervise: {error}") from None
    return resumed, _env_number(LOSS_BAND_ENV)


class LrScale:
    """Multiplies an optimizer's lr by `factor` for its `step()` only, through its step hooks:
    the scheduler (closed-form or chainable) never sees the scaled value, so it keeps its own
    schedule and the factor applies on top of it."""

    def __init__(self) -> None:
        self.factor = 1.0
        self._saved: list[float] | None = None
        self._attached: Any = None

    def attach(self, optimizer: Any) -> None:
        """Hook into `optimizer` (or the optimizer an accelerate wrapper holds), once."""
        inner = getattr(optimizer, "optimizer", optimizer)
        if self._attached is inner:
            return
        if not hasattr(inner, "register_step_pre_hook"):
            raise ConfigError("lr factor: the optimizer has no step hooks (needs torch >= 2.0)")
        inner.register_step_pre_hook(lambda opt, args, kwargs: self._scale(opt))
        inner.register_step_post_hook(lambda opt, args, kwargs: self._restore(opt))
        self._attached = inner

    def _scale(self, optimizer: Any) -> None:
        if self.factor == 1.0:
            return
        self._saved = [group["lr"] for group in optimizer.param_groups]
        for group in optimizer.param_groups:
            group["lr"] = group["lr"] * self.factor

    def _restore(self, optimizer: Any) -> None:
        if self._saved is not None:
            for group, lr in zip(optimizer.param_groups, self._saved, strict=True):
                group["lr"] = lr
            self._saved = None
