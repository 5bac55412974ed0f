"""The outer loop for any training framework: run, follow the logs, kill, roll back, relaunch, alert.

`Supervisor` runs a training command in its own process group, follows its step log (the guard's
`LOGS/steps` folder of Parquet files, or a CSV/JSONL file the user names, read as it grows) and
judges every step with the guard's spike detector (`monitor.default_monitor`) and diagnosis
(`diagnose`, with the spike step's per-sample losses from the loss log when there is one). Each
spike's action (per diagnosis, as the guard's) is `log`, `watch` (the recover-or-roll-back rule of
`dataclean.feedback.playbook`), `rollback` or `stop`. A rollback kills the process group cleanly
(SIGTERM, then SIGKILL after `grace` seconds), records the incident, merges a data spike's blamed
samples into the quarantine list (so the relaunched run's sampler never draws them), picks the
last checkpoint at or before the spike and relaunches the command with the resume arguments
(`--resume_from_checkpoint {checkpoint}` by default, the Hugging Face Trainer's) and the lr factor
the way the user says: an argument template (`{lr_factor}`, `{lr}` with a base lr) and the
environment (DATACLEAN_LR_FACTOR, read by `TrainingGuard`, which holds the factor until the loss
is back in the band, DATACLEAN_LOSS_BAND, then ramps it back). At most `max_restarts` times; then
it stops the run. Each incident, once resolved (recovered, rolled back, stopped), calls the alert
command (JSON on stdin) and POSTs the same JSON to the webhook: step, diagnosis, evidence,
action, and where training resumed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shlex
import signal
import subprocess
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from dataclean import columns as C
from dataclean.errors import ConfigError
from dataclean.feedback import schema as S
from dataclean.feedback.detectors import DIAGNOSES, DiagnosisRules, diagnose
from dataclean.feedback.follow import LogFollower, step_rows
from dataclean.feedback.logwriter import FLUSH_SECONDS_ENV
from dataclean.feedback.monitor import SpikeEvent, SpikeMonitor, default_monitor
from dataclean.feedback.playbook import (
    LOSS_BAND_ENV,
    LR_FACTOR_ENV,
    RAMP_STEPS_ENV,
    SETTLE_STEPS_ENV,
    Decision,
    Playbook,
    Recovery,
    band_top,
)
from dataclean.quarantine.lists import make_list, merge_into

SUPERVISE_ACTIONS = ("log", "watch", "rollback", "stop")
RESUME_ENV = "DATACLEAN_RESUME_CHECKPOINT"
RESUME_STEP_ENV = "DATACLEAN_RESUME_STEP"
RESTART_ENV = "DATACLEAN_RESTART"

logger = logging.getLogger("dataclean.supervise")


@dataclass
class SuperviseOptions:
    """How to follow, judge, relaunch and alert (the `dataclean supervise` options)."""

    steps: Path
    losses: Path | None = None
    checkpoints: Path | None = None
    checkpoint_pattern: str = "checkpoint-{step}"
    quarantine: Path | None = None
    incidents: Path | None = None
    resume_args: str = "--resume_from_checkpoint {checkpoint}"
    lr_args: str = ""
    lr_env: str = LR_FACTOR_ENV
    base_lr: float | None = None
    action: Mapping[str, str] = field(default_factory=lambda: dict.fromkeys(DIAGNOSES, "watch"))
    playbook: Playbook = field(default_factory=Playbook)
    max_restarts: int = 3
    alert_command: str | None = None
    webhook: str | None = None
    poll: float = 0.5
    grace: float = 30.0
    flush_seconds: float = 2.0
    corpus: Path | None = None
    spike_window: int | None = None
    spike_ratio: float | None = None

    def __post_init__(self) -> None:
        for diagnosis, chosen in self.action.items():
            if chosen not in SUPERVISE_ACTIONS:
                raise ConfigError(
                    f"supervise --action: {chosen!r} is not one of {', '.join(SUPERVISE_ACTIONS)}"
                )
            if diagnosis not in DIAGNOSES:
                raise ConfigError(
                    f"supervise --action: {diagnosis!r} is not a diagnosis ({', '.join(DIAGNOSES)})"
                )
        if "{lr}" in self.lr_args and self.base_lr is None:
            raise ConfigError("supervise --lr-arg: {lr} needs --base-lr (the lr the schedule starts from)")
        if self.max_restarts < 0:
            raise ConfigError(f"supervise --max-restarts: must be at least 0, got {self.max_restarts}")


@dataclass
class Checkpoint:
    step: int
    path: Path


def find_checkpoints(folder: Path, pattern: str) -> list[Checkpoint]:
    """Checkpoints in `folder` whose names match `pattern` (`{step}` is the step training resumes
    at; any extension is allowed), sorted by step. Hidden (in-progress) names are passed over."""
    if "{step}" not in pattern:
        raise ConfigError(f"supervise --checkpoint-pattern: {pattern!r} has no {{step}}")
    regex = re.compile("^" + re.escape(pattern).replace(r"\{step\}", r"(\d+)") + r"(\.[\w.]+)?$")
    found = []
    for path in folder.iterdir() if folder.is_dir() else []:
        match = regex.match(path.name)
        if match and not path.name.startswith("."):
            found.append(Checkpoint(int(match.group(1)), path))
    return sorted(found, key=lambda c: c.step)


class Supervisor:
    """Runs `command` under the playbook (see the module docstring); `run()` returns the exit code."""

    def __init__(self, command: Sequence[str], options: SuperviseOptions) -> None:
        if not command:
            raise ConfigError("supervise: no training command given (after --)")
        self.command = list(command)
        self.options = options
        folder = options.steps.parent  # LOGS for the guard's LOGS/steps
        self.incidents_path = options.incidents or folder / "supervise.jsonl"
        self.quarantine_path = options.quarantine or folder / "quarantine.parquet"
        self.monitor: SpikeMonitor = default_monitor()
        if options.spike_window is not None:
            self.monitor = replace(self.monitor, window=options.spike_window, events=[])
        if options.spike_ratio is not None:
            self.monitor = replace(self.monitor, min_ratio=options.spike_ratio, events=[])
        self.rules = DiagnosisRules()
        self.recovery = Recovery(options.playbook)
        self.steps = LogFollower(options.steps)
        self.history: list[tuple[float, ...]] = []
        self.restarts = 0
        self.child: subprocess.Popen[bytes] | None = None
        self.launched_at = 0.0
        self.open_incident: dict[str, Any] | None = None
        self.alerts = 0
        self._window: np.ndarray | None = None

    # -- the process --------------------------------------------------------------------------
    def _launch(self, checkpoint: Checkpoint | None = None, factor: float | None = None) -> None:
        command = list(self.command)
        env = dict(os.environ)
        env.setdefault(FLUSH_SECONDS_ENV, str(self.options.flush_seconds))
        if checkpoint is not None:
            values = {"checkpoint": str(checkpoint.path), "step": checkpoint.step, "lr_factor": factor}
            if self.options.base_lr is not None and factor is not None:
                values["lr"] = self.options.base_lr * factor
            command += [part.format(**values) for part in shlex.split(self.options.resume_args)]
            command += [part.format(**values) for part in shlex.split(self.options.lr_args)]
            env |= {RESUME_ENV: str(checkpoint.path), RESUME_STEP_ENV: str(checkpoint.step)}
            env |= {RESTART_ENV: str(self.restarts), self.options.lr_env: f"{factor:g}"}
            env[LR_FACTOR_ENV] = f"{factor:g}"
            env[RAMP_STEPS_ENV] = str(self.options.playbook.ramp_steps)
            env[SETTLE_STEPS_ENV] = str(self.options.playbook.settle_steps)
            if self._window is not None:
                env[LOSS_BAND_ENV] = f"{band_top(self._window, self.options.playbook.band_quantile):.6g}"
        self.steps.skip_existing()  # a killed run's last flush is not this run's
        self.launched_at = time.time()
        self.child = subprocess.Popen(command, env=env, start_new_session=True)
        self._record({"event": "launch", "pid": self.child.pid, "command": command, "restart": self.restarts})
        logger.warning("dataclean supervise: launched %s (pid %d)", shlex.join(command), self.child.pid)

    def _kill(self) -> None:
        """SIGTERM to the whole process group, SIGKILL after the grace period."""
        child = self.child
        if child is None or child.poll() is not None:
            return
        try:
            os.killpg(child.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            child.wait(timeout=self.options.grace)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        with contextlib.suppress(ProcessLookupError):  # children of the command that outlived it
            os.killpg(child.pid, signal.SIGKILL)

    def run(self) -> int:
        """Supervise until the command ends on its own (its exit code) or the run is stopped."""
        previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

        def interrupted(number: int, frame: Any) -> None:
            self._kill()
            raise SystemExit(128 + number)

        for number in previous:
            signal.signal(number, interrupted)
        try:
            self._launch()
            while True:
                assert self.child is not None
                finished = self.child.poll()
                outcome = self._follow()
                if outcome is not None:
                    return outcome
                if finished is not None:
                    self._record({"event": "exit", "pid": self.child.pid, "returncode": finished})
                    return finished
                time.sleep(self.options.poll)
        finally:
            self._kill()
            for number, handler in previous.items():
                signal.signal(number, handler)

    # -- judging the steps ---------------------------------------------------------------------
    def _follow(self) -> int | None:
        """Judge the steps logged since the last poll; an exit code when the run was stopped."""
        for row in self.steps.poll():
            step, loss = int(row[C.STEP]), float(row[C.LOSS])
            self.history.append(
                tuple(float("nan") if row.get(k) is None else float(row[k]) for k in _STEP_KEYS)
            )
            event = self.monitor.update(step, loss, lr=row.get(C.LR), grad_norm=row.get(C.GRAD_NORM))
            decision = self._on_spike(event) if event is not None else self.recovery.observe(step, loss)
            if decision is None:
                continue
            if decision.decision == "recovered":
                self._record(asdict(decision))
                self._close_incident(decision, "recovered")
            elif decision.decision == "watch":
                self._record(asdict(decision))
            elif decision.decision in ("rollback", "stop"):
                return self._roll_back(decision) if decision.decision == "rollback" else self._stop(decision)
        return None

    def _on_spike(self, event: SpikeEvent) -> Decision | None:
        history = self._history_table()
        batch = step_rows(self.options.losses, event.step, self.launched_at) if self.options.losses else None
        spike = diagnose(event, history, batch if batch is not None and batch.num_rows else None, self.rules)
        chosen = self.options.action.get(spike.diagnosis, "log")
        blamed = spike.sample_ids if spike.diagnosis == "data" else []
        if blamed:
            self._quarantine(event.step, blamed)
        record = {
            "event": "spike",
            "step": event.step,
            "diagnosis": spike.diagnosis,
            "evidence": spike.evidence,
            "recommended": spike.action,
            "action": chosen,
            "loss": event.loss,
            "level": event.level,
            "blamed": blamed,
            "missing": spike.missing,
        }
        second = self.recovery.second_spike(event.step) if chosen != "stop" else None
        if second is not None:
            record["action"] = "rollback"
            self._record(record)
            if self.open_incident is not None:
                self.open_incident["evidence"] += [f"second spike at step {event.step}", *spike.evidence]
                self.open_incident["blamed"] += blamed
            return second
        self._record(record)
        if chosen == "log":
            return None
        self.open_incident = record
        self._window = self.monitor.recent_losses()
        if chosen == "watch":
            return self.recovery.watch(event.step, self._window)
        why = f"action {chosen} for a {spike.diagnosis} spike"
        return Decision(event.step, chosen, why, spike_step=event.step)

    def _history_table(self) -> pa.Table:
        rows = np.asarray(self.history, dtype="float64").reshape(-1, len(_STEP_KEYS))
        rows = rows[np.argsort(rows[:, 0], kind="stable")]
        columns = [pa.array(rows[:, 0].astype("int64"))]
        columns += [pa.array(rows[:, i], from_pandas=True) for i in range(1, len(_STEP_KEYS))]
        return pa.Table.from_arrays(columns, schema=S.STEP_LOG_SCHEMA)

    def _quarantine(self, step: int, blamed: list[str]) -> None:
        hashes: dict[str, str] = {}
        if self.options.corpus is not None:
            from dataclean.feedback.corpus import read_corpus_rows

            rows, _ = read_corpus_rows(self.options.corpus, blamed)
            hashes = dict(
                zip(rows.column(C.ID).to_pylist(), rows.column(C.TEXT_HASH).to_pylist(), strict=True)
            )
        entries = [
            {
                C.SAMPLE_ID: sample_id,
                C.TEXT_HASH: hashes.get(sample_id),
                C.REASON: f"spike:{step}",
                C.FIRST_STEP: step,
                C.LAST_STEP: step,
                C.OCCURRENCES: 1,
                C.ACTION: "drop",
                C.SOURCE: "supervise",
            }
            for sample_id in blamed
        ]
        merge_into(self.quarantine_path, make_list(entries))

    # -- acting ---------------------------------------------------------------------------------
    def _roll_back(self, decision: Decision) -> int | None:
        spike_step = decision.spike_step if decision.spike_step is not None else decision.step
        folder = self.options.checkpoints
        before = (
            [c for c in find_checkpoints(folder, self.options.checkpoint_pattern) if c.step <= spike_step]
            if folder
            else []
        )
        if self.restarts >= self.options.max_restarts or not before:
            problem = (
                f"{self.restarts} restarts already (--max-restarts)"
                if before
                else "no checkpoint at or before the spike" + ("" if folder else " (no --checkpoints folder)")
            )
            return self._stop(
                Decision(
                    decision.step, "stop", f"{decision.why}; a rollback is due but {problem}", spike_step
                )
            )
        checkpoint = before[-1]
        factor = self.options.playbook.lr_factor
        self._kill()
        self.restarts += 1
        decision.checkpoint, decision.checkpoint_step, decision.lr_factor = (
            str(checkpoint.path),
            checkpoint.step,
            factor,
        )
        decision.why += (
            f": killed the run, relaunching from {checkpoint.path} (step {checkpoint.step}) at {factor:g}x "
            f"the lr (restart {self.restarts} of at most {self.options.max_restarts})"
        )
        self._record(asdict(decision))
        self._close_incident(decision, "rollback")
        self.recovery.watched = None
        if self._window is not None:
            self.monitor.reset_recent(self._window)
        self.history = [row for row in self.history if row[0] < checkpoint.step]
        self._launch(checkpoint, factor)
        return None

    def _stop(self, decision: Decision) -> int:
        self._kill()
        decision.decision = "stop"
        decision.why += ": the run was stopped"
        self._record(asdict(decision))
        self._close_incident(decision, "stop")
        logger.error("dataclean supervise: %s", decision.why)
        return 3

    def _close_incident(self, decision: Decision, action: str) -> None:
        """Alert once per incident, when its outcome is known."""
        incident = self.open_incident or {"step": decision.spike_step, "diagnosis": "unknown", "evidence": []}
        self.open_incident = None
        body = {
            "step": incident["step"],
            "diagnosis": incident["diagnosis"],
            "evidence": incident["evidence"] + [decision.why],
            "action": action,
            "decided_at_step": decision.step,
            "blamed": incident.get("blamed", []),
            "checkpoint": decision.checkpoint,
            "checkpoint_step": decision.checkpoint_step,
            "lr_factor": decision.lr_factor,
            "restarts": self.restarts,
            "command": self.command,
        }
        self.alerts += 1
        self._record({"event": "alert", **body})
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        if self.options.alert_command:
            try:
                subprocess.run(self.options.alert_command, shell=True, input=data, timeout=60, check=False)
            except (OSError, subprocess.TimeoutExpired) as error:
                logger.warning("dataclean supervise: the alert command failed: %s", error)
        if self.options.webhook:
            request = urllib.request.Request(
                self.options.webhook, data=data, headers={"Content-Type": "application/json"}, method="POST"
            )
            try:
                urllib.request.urlopen(request, timeout=10).close()
            except OSError as error:
                logger.warning("dataclean supervise: the webhook %s failed: %s", self.options.webhook, error)

    def _record(self, record: dict[str, Any]) -> None:
        self.incidents_path.parent.mkdir(parents=True, exist_ok=True)
        record.setdefault("time", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        with open(self.incidents_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")


_STEP_KEYS = (C.STEP, C.LOSS, C.LR, C.GRAD_NORM, C.LOSS_SCALE)
