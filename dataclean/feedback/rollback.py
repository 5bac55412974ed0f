"""The playbook carried out inside one training process: watch, roll back in place, lr factor.

`PlaybookRunner` is the part of `TrainingGuard` that acts on the decisions of
`dataclean.feedback.playbook.Recovery`: it starts a watch on a spike whose action is `watch`,
turns a second spike into a rollback, restores the last checkpoint before the spike from the
guard's `TrainingState` (and returns the detector and the step history to how they were before
the spike, and forgets the checkpoints of the abandoned steps), scales the lr of every update by
the playbook's factor (`LrScale`), and undoes the scheduler's advance after a dropped update
(`hold_scheduler`, put back at the next check). A process relaunched by `dataclean supervise`
starts with the factor it was given (DATACLEAN_LR_FACTOR) held, then ramped back.
"""

from __future__ import annotations

import copy
from typing import Any

from dataclean.errors import ConfigError
from dataclean.feedback.monitor import SpikeMonitor
from dataclean.feedback.playbook import Decision, LrScale, Playbook, Recovery, band_top, resume_from_env


class PlaybookRunner:
    """The playbook's state in one guard: the `Recovery`, the lr scale, a held scheduler."""

    def __init__(self, playbook: Playbook | None = None) -> None:
        self.recovery = Recovery(playbook)
        self.lr_scale = LrScale()
        self._held: tuple[Any, Any, dict[str, Any], list[float]] | None = None
        self._window: Any = None  # the detector's window at the spike that may be rolled back
        resumed = resume_from_env(self.recovery.playbook)
        if resumed is not None:
            self.recovery.resume(*resumed)

    def begin(self, step: int, optimizer: Any) -> float:
        """At the start of a check: put back a held scheduler, set this step's lr factor."""
        self.release_scheduler()
        factor = self.recovery.factor(step)
        if factor != 1.0 or self.lr_scale.factor != 1.0:
            if optimizer is None:
                raise ConfigError("guard: an lr factor is due but the guard knows no optimizer")
            self.lr_scale.attach(optimizer)
            self.lr_scale.factor = factor
        return factor

    def on_spike(self, incident: Any, monitor: SpikeMonitor) -> Decision | None:
        """The decision on a spike: watch it, roll back now, or (a second spike while one is
        watched) roll back. Sets `incident.action` to what is done."""
        if incident.action == "stop":
            self.recovery.watched = None
            return None
        second = self.recovery.second_spike(incident.step)
        if second is not None:
            incident.action = "rollback"
            return second
        if incident.action in ("watch", "rollback"):
            self._window = monitor.recent_losses()
        if incident.action == "watch":
            return self.recovery.watch(incident.step, self._window)
        if incident.action == "rollback":
            why = f"action rollback for a {incident.diagnosis} spike"
            return Decision(incident.step, "rollback", why, spike_step=incident.step)
        return None

    def roll_back(self, decision: Decision, guard: Any) -> Decision:
        """Restore the guard's state from the last checkpoint at or before the spike; a `stop`
        decision instead when there is no state, no such checkpoint, or no rollback left."""
        spike_step = decision.spike_step if decision.spike_step is not None else decision.step
        before = [(s, p) for s, p in guard.checkpoints if s <= spike_step]
        factor = self.recovery.playbook.lr_factor
        problem = None
        if guard.state is None:
            problem = "the guard has no state= to restore"
        elif not before:
            problem = "no checkpoint before the spike was noted"
        elif not self.recovery.can_roll_back():
            problem = f"{self.recovery.rollbacks} rollbacks already (playbook.max_rollbacks)"
        if problem is not None:
            self.recovery.watched = None
            stop = Decision(decision.step, "stop", f"{decision.why}; a rollback is due but {problem}")
            stop.spike_step, stop.lr_factor = spike_step, factor
            if before:
                stop.checkpoint_step, stop.checkpoint = max(before)
                stop.why += f": resume from {stop.checkpoint} (step {stop.checkpoint_step})"
            stop.why += f" at {factor:g}x the lr"
            return stop
        state = guard.state
        checkpoint_step, path = max(before)
        for group in state.optimizer.param_groups:  # this step's update is dropped
            for parameter in group["params"]:
                parameter.grad = None
        resumed = state.load(path)
        if resumed != checkpoint_step:
            raise ValueError(f"rollback: {path} holds step {resumed}, noted as step {checkpoint_step}")
        self.hold_scheduler(state.scheduler, state.optimizer)
        guard.checkpoints = [(s, p) for s, p in guard.checkpoints if s <= checkpoint_step]
        window = self._window if self._window is not None else guard.monitor.recent_losses()
        guard.monitor.reset_recent(window)
        guard.forget_steps(checkpoint_step)
        self.recovery.rolled_back(spike_step, band_top(window, self.recovery.playbook.band_quantile))
        self._window = None
        decision.why += (
            f": restored {path} (step {checkpoint_step}: model, optimizer, scheduler, sampler, RNG); "
            f"training continues from step {checkpoint_step} at {factor:g}x the schedule's lr"
        )
        decision.checkpoint, decision.checkpoint_step, decision.lr_factor = str(path), checkpoint_step, factor
        return decision

    def hold_scheduler(self, scheduler: Any, optimizer: Any) -> None:
        """Keep the scheduler's state (and the lrs it set) to put back at the next check: its
        advance after a dropped update is undone."""
        if scheduler is not None and optimizer is not None and hasattr(scheduler, "state_dict"):
            lrs = [group["lr"] for group in optimizer.param_groups]
            self._held = (scheduler, optimizer, copy.deepcopy(scheduler.state_dict()), lrs)

    def release_scheduler(self) -> None:
        """Put a held scheduler back (a no-op when nothing is held)."""
        if self._held is None:
            return
        scheduler, optimizer, state, lrs = self._held
        scheduler.load_state_dict(state)
        for group, value in zip(optimizer.param_groups, lrs, strict=True):
            group["lr"] = value
        self._held = None
