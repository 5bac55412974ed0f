"""Guard a training run while it trains: catch a loss spike, diagnose it, and act on it at once.

Each optimizer step the loop hands the guard the step's loss, grad norm, learning rate, loss scale
(read from a `torch.amp.GradScaler` when one is given) and the batch's per-sample losses and ids,
after `backward()` and before `optimizer.step()`. The guard judges the loss with `SpikeMonitor`;
on a spike it diagnoses the step with the same rules as `dataclean feedback`
(`dataclean.feedback.detectors`) from the steps it remembers and the batch's losses, writes an
incident record (FOLDER/incidents.jsonl: step, diagnosis, evidence, the batch's ids and losses),
and for a `data` diagnosis merges the blamed samples into the quarantine list at once
(idempotent: `quarantine.merge_lists`). Then it acts as the user chose, per diagnosis or for all:

- `log` (default): record and go on;
- `skip`: no weight update for this step. The guard sets the step's gradients to None, so the
  `optimizer.step()` that follows changes nothing: PyTorch optimizers pass over parameters without
  a gradient (no update, no weight decay, no moment or step-count change). With a GradScaler call
  `scaler.unscale_(optimizer)` before `check` (as gradient clipping needs anyway);
- `stop`: the same, and `Verdict.stop` is set with a message naming the last checkpoint before
  the spike (`note_checkpoint`) and the learning rate to resume at (0.1-0.3x the lr at the spike,
  the usual advice after a divergence);
- `rollback`: restore the last checkpoint before the spike in process (`state=`, a
  `TrainingState`: model, optimizer, scheduler, sampler, RNG; written by `save_checkpoint`) and
  continue at a lower lr ramped back to the schedule (`playbook=`, `dataclean.feedback.playbook`).
  `Verdict.rollback` tells the loop to restart its loader at `Verdict.resume_step`; the blamed
  samples are on the list, so the replay never draws them. Without `state` it stops instead;
- `watch`: keep training and judge recovery (`dataclean.feedback.playbook`): recovered -> carry
  on; not recovered within the window, or a second spike -> roll back as above.

Every decision (watch, recovered, rollback, stop, the lr ramp) is a line of incidents.jsonl with
`"event": "decision"` and its reason. On `skip` (and `rollback`) the lr scheduler does not advance
for the dropped update, as Hugging Face's Trainer and Megatron-LM do for an update the fp16 loss
scaler skipped: the guard puts back the scheduler's state (`scheduler=` or `state.scheduler`) at
the next `check`, so the schedule counts updates, not batches. Blamed samples are listed with
their `text_hash` and `text` whenever they can be known: the batch's `texts=`, a `view=` (or the
state's sampler's view) with texts or hashes, or the cleaned `corpus=` the ids come from (a
listed text lets the next run find its near-duplicates even under other ids).

With `log=True` (default) the guard also writes the per-sample loss log and the step log
(FOLDER/losses, FOLDER/steps), so `dataclean feedback` and `dataclean feedback replay` read the
same run afterwards. Torch is never imported here: tensors are read through `.item()`/`.detach()`.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from dataclean import columns as C
from dataclean.errors import ConfigError
from dataclean.feedback import schema as S
from dataclean.feedback.corpus import read_corpus_rows
from dataclean.feedback.detectors import DIAGNOSES, DiagnosisRules, diagnose
from dataclean.feedback.logwriter import LossLogWriter, StepLogWriter
from dataclean.feedback.monitor import SpikeEvent, SpikeMonitor, default_monitor
from dataclean.feedback.packed import flat_sample_ids
from dataclean.feedback.playbook import Decision, Playbook
from dataclean.feedback.robust import robust_z
from dataclean.feedback.rollback import PlaybookRunner
from dataclean.ids import text_hash
from dataclean.quarantine.lists import make_list, merge_into

GUARD_ACTIONS = ("log", "skip", "stop", "watch", "rollback")
RESUME_LR_FACTORS = (0.1, 0.3)  # of the lr at the spike: the usual advice when resuming after one

logger = logging.getLogger("dataclean.guard")


def _scalar(value: Any) -> float | None:
    """A Python float from a float, a numpy scalar or a 0-d torch tensor (None stays None)."""
    if value is None:
        return None
    if hasattr(value, "item"):
        value = value.item()
    return float(value)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


@dataclass
class Incident:
    """One spike as the guard recorded it (one line of incidents.jsonl)."""

    step: int
    diagnosis: str
    evidence: list[str]
    recommended: str
    action: str
    loss: float | None
    level: float | None
    threshold: float | None
    lr: float | None
    grad_norm: float | None
    loss_scale: float | None
    rank: int | None
    epoch: int | None
    sample_ids: list[str]
    losses: list[float | None]
    blamed: list[str]
    quarantined: list[str]
    missing: list[str] = field(default_factory=list)
    checkpoint: str | None = None
    checkpoint_step: int | None = None
    resume_lr: list[float] | None = None
    event: str = "spike"
    time: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))


@dataclass
class Verdict:
    """What the loop should do with this step: `skip` (its update is dropped), `stop` (end
    training; `message` says from where to resume), `rollback` (a checkpoint was restored:
    restart the loader and count steps from `resume_step`), the `incident` when the step spiked,
    the playbook's `decisions` and the lr factor of this step's update."""

    step: int
    incident: Incident | None = None
    skip: bool = False
    stop: bool = False
    message: str = ""
    rollback: bool = False
    resume_step: int | None = None
    lr_factor: float = 1.0
    decisions: list[Decision] = field(default_factory=list)


class _StepHistory:
    """The last `size` steps (step, loss, lr, grad norm, loss scale) in a ring of numpy arrays:
    O(1) per step; turned into a step-log table only when a spike needs a diagnosis."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.values = np.full((size, 5), np.nan)
        self.count = 0

    def add(self, step: int, loss: float, lr: float | None, grad: float | None, scale: float | None) -> None:
        row = self.values[self.count % self.size]
        row[0], row[1] = step, loss
        row[2] = np.nan if lr is None else lr
        row[3] = np.nan if grad is None else grad
        row[4] = np.nan if scale is None else scale
        self.count += 1

    def table(self, extra: Sequence[tuple[float, ...]] = ()) -> pa.Table:
        """The remembered steps in step order (plus `extra` rows), with the step-log schema."""
        n = min(self.count, self.size)
        start = self.count - n
        index = np.arange(start, self.count) % self.size
        rows = self.values[index]
        if extra:
            rows = np.vstack([rows, np.asarray(extra, dtype="float64")])
        rows = rows[np.argsort(rows[:, 0], kind="stable")]
        columns = [pa.array(rows[:, 0].astype("int64"))]
        columns += [pa.array(rows[:, i], from_pandas=True) for i in range(1, 5)]
        return pa.Table.from_arrays(columns, schema=S.STEP_LOG_SCHEMA)

    def truncate(self, step: int) -> None:
        """Forget the steps at or after `step` (a rollback abandoned them)."""
        n = min(self.count, self.size)
        rows = self.values[np.arange(self.count - n, self.count) % self.size]
        kept = rows[rows[:, 0] < step]
        self.values[:] = np.nan
        self.values[: len(kept)] = kept
        self.count = len(kept)


class TrainingGuard:
    """Watches a training run step by step; see the module docstring.

    `folder`: where incidents.jsonl (and, with `log`, the loss and step logs) go. `action`: one of
    log/skip/stop for every spike, or a mapping from diagnosis to action (others: log), e.g.
    `{"data": "skip", "grad_explosion": "stop"}`. `quarantine`: the list to merge blamed samples
    into (default FOLDER/quarantine.parquet). `view`: a `DatasetQuarantine` over the training
    data: gives the text hashes of blamed samples and is refreshed as soon as the list changes.
    `monitor`: the spike detector (default: `dataclean feedback`'s settings, `default_monitor`).
    `history`: steps remembered for the diagnosis (grad-norm and loss-scale baselines).
    `agree`: with several data-parallel ranks, a collective that returns the largest of every
    rank's code (0 go on, 1 skip, 2 stop), e.g. `torch_utils.max_over_ranks`: all ranks then skip
    or stop together, so their replicas stay identical (a rank's guard sees only its own batch).
    `state`: a `TrainingState` for `rollback`/`watch` (and `save_checkpoint`). `playbook`: the
    watch window, lr factor and ramp (`Playbook`). `corpus`: the cleaned corpus (a dataclean
    output folder) the sample ids come from, for the text hashes of blamed samples.
    """

    def __init__(
        self,
        folder: str | os.PathLike[str],
        action: str | Mapping[str, str] = "log",
        quarantine: str | os.PathLike[str] | None = None,
        rank: int | None = None,
        monitor: SpikeMonitor | None = None,
        rules: DiagnosisRules | None = None,
        log: bool = True,
        history: int = 2048,
        view: Any = None,
        agree: Callable[[int], int] | None = None,
        state: Any = None,
        playbook: Playbook | None = None,
        corpus: str | os.PathLike[str] | None = None,
    ) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        actions = dict(action) if isinstance(action, Mapping) else dict.fromkeys(DIAGNOSES, action)
        for diagnosis, chosen in actions.items():
            if chosen not in GUARD_ACTIONS:
                raise ConfigError(f"guard action: {chosen!r} is not one of {', '.join(GUARD_ACTIONS)}")
            if diagnosis not in DIAGNOSES:
                raise ConfigError(f"guard action: {diagnosis!r} is not a diagnosis ({', '.join(DIAGNOSES)})")
        if agree is not None and {"watch", "rollback"} & set(actions.values()):
            raise ConfigError(
                "guard action: watch and rollback restore one process; with several ranks run "
                "under `dataclean supervise`, which relaunches every rank from the checkpoint"
            )
        self.actions = actions
        self.quarantine_path = Path(quarantine) if quarantine else self.folder / "quarantine.parquet"
        self.incidents_path = self.folder / "incidents.jsonl"
        self.rank = rank
        self.monitor = monitor or default_monitor()
        self.rules = rules or DiagnosisRules()
        self.view = view if view is not None else getattr(getattr(state, "sampler", None), "view", None)
        self.agree = agree
        self.state = state
        self.corpus = corpus
        self.playbook = PlaybookRunner(playbook)
        self.incidents: list[Incident] = []
        self.checkpoints: list[tuple[int, str]] = []
        self.stopped: Verdict | None = None
        self._history = _StepHistory(history)
        # The per-sample losses of the detector's window of steps: the clean spread a spike's
        # samples are blamed against (`blame`).
        self._recent: deque[np.ndarray] = deque(maxlen=self.monitor.window)
        self.loss_log = LossLogWriter(self.folder / "losses", rank=rank) if log else None
        self.step_log = StepLogWriter(self.folder / "steps", rank=rank) if log else None

    def forget_steps(self, step: int) -> None:
        """A rollback to `step`: the remembered steps from it on belong to the abandoned run."""
        self._history.truncate(step)

    def note_checkpoint(self, path: str | os.PathLike[str], step: int) -> None:
        """Record a checkpoint; `step` is the step training resumes at from it (the number of
        optimizer steps it holds), so it is "before" a spike at any step >= `step`."""
        self.checkpoints.append((int(step), str(path)))

    def save_checkpoint(self, path: str | os.PathLike[str], step: int) -> Path:
        """Write the `state` (model, optimizer, scheduler, sampler, RNG) to `path` and note it as
        the checkpoint training resumes from at `step`; a rollback restores it."""
        if self.state is None:
            raise ConfigError("save_checkpoint: the guard has no state= (a TrainingState) to save")
        self.playbook.release_scheduler()  # a skipped update's scheduler advance is not saved
        written = Path(self.state.save(path, step))
        self.note_checkpoint(written, step)
        return written

    def check(
        self,
        step: int,
        loss: Any,
        sample_ids: Sequence[str] = (),
        losses: Any = None,
        grad_norm: Any = None,
        lr: Any = None,
        loss_scale: Any = None,
        scaler: Any = None,
        optimizer: Any = None,
        tokens: Any = None,
        epoch: int | None = None,
        texts: Sequence[str] | None = None,
        scheduler: Any = None,
    ) -> Verdict:
        """Judge one step (after backward, before `optimizer.step()`); see the module docstring.

        `losses`: the batch's per-sample losses in the order of `sample_ids` (list, numpy array or
        tensor; for packed rows one per sample segment, `per_sample_loss(..., position_ids=)`, with
        `sample_ids` flat or as per-row lists). `scaler`: a GradScaler, whose current scale is the
        step's loss scale. `optimizer`: needed for `skip`/`stop` to drop this step's update
        (default: the state's). `texts`: the batch's texts (hashed only on a spike). `scheduler`:
        whose advance a skipped update undoes (default: the state's). `lr`: the schedule's lr
        (default: read from the optimizer).
        """
        if self.state is not None:
            optimizer = optimizer if optimizer is not None else self.state.optimizer
            scheduler = scheduler if scheduler is not None else self.state.scheduler
        factor = self.playbook.begin(step, optimizer)
        loss_value = _scalar(loss)
        assert loss_value is not None
        sample_ids = flat_sample_ids(sample_ids)  # a packed batch's per-row lists, in order
        grad = _scalar(grad_norm)
        rate = _scalar(lr)
        if rate is None and optimizer is not None:
            rate = float(optimizer.param_groups[0]["lr"])
        rate = None if rate is None else rate * factor  # the lr this step's update uses
        scale = (
            _scalar(scaler.get_scale()) if scaler is not None and scaler.is_enabled() else _scalar(loss_scale)
        )
        per_sample = None
        if losses is not None:
            if hasattr(losses, "detach"):
                losses = losses.detach().float().cpu().numpy()
            per_sample = np.asarray(losses, dtype="float64").reshape(-1)
        if self.loss_log is not None and per_sample is not None:
            self.loss_log.log(step, sample_ids, per_sample, epoch=epoch, tokens=tokens)
        if self.step_log is not None:
            self.step_log.log(step, loss_value, lr=rate, grad_norm=grad, loss_scale=scale)
        self._history.add(step, loss_value, rate, grad, scale)
        event = self.monitor.update(step, loss_value, sample_ids, lr=rate, grad_norm=grad, loss_scale=scale)
        if event is None:
            if per_sample is not None:
                self._recent.append(per_sample)
            verdict = Verdict(step=step)
            decision = self.playbook.recovery.observe(step, loss_value)
        else:
            batch = self._batch_table(step, sample_ids, per_sample, epoch)
            verdict = self._on_spike(event, batch, scaler, epoch, texts)
            assert verdict.incident is not None
            decision = self.playbook.on_spike(verdict.incident, self.monitor)
        verdict.lr_factor = factor
        if decision is not None:
            self._decide(verdict, decision)
        if self.agree is not None:  # every rank calls it every step: a collective
            mine = 2 if verdict.stop else 1 if verdict.skip else 0
            agreed = int(self.agree(mine))
            if agreed > mine:
                verdict.skip, verdict.stop = True, agreed == 2
                verdict.message = (
                    f"dataclean guard: step {step}: another rank's guard chose to "
                    f"{'stop' if verdict.stop else 'skip'}; this rank follows"
                )
                logger.warning(verdict.message)
        if verdict.skip and optimizer is not None:
            drop_update(optimizer)
            if not verdict.rollback:
                self.playbook.hold_scheduler(scheduler, optimizer)
        if verdict.stop:
            self.stopped = verdict
        return verdict

    def _decide(self, verdict: Verdict, decision: Decision) -> None:
        """Carry out and record one decision of the playbook (a rollback restores a checkpoint)."""
        if decision.decision == "rollback":
            decision = self.playbook.roll_back(decision, self)
        if decision.decision == "rollback":
            verdict.skip, verdict.rollback, verdict.resume_step = True, True, decision.checkpoint_step
        elif decision.decision == "stop":
            verdict.skip = verdict.stop = True
        verdict.decisions.append(decision)
        self._record(asdict(decision))
        text = f"dataclean guard: step {decision.step}: {decision.decision}: {decision.why}"
        verdict.message = f"{verdict.message}\n{text}" if verdict.message else text
        logger.warning(text)

    def _record(self, record: dict[str, Any]) -> None:
        with open(self.incidents_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")

    def _on_spike(
        self, event: SpikeEvent, batch: pa.Table | None, scaler: Any, epoch: int | None, texts: Any
    ) -> Verdict:
        """Diagnose a spike, quarantine a data spike's samples, record the incident."""
        step, rate, grad, scale = event.step, event.lr, event.grad_norm, event.loss_scale
        extra: list[tuple[float, ...]] = []
        if scaler is not None and scale is not None and grad is not None and not math.isfinite(grad):
            # The scaler found inf/nan gradients: its update() lowers the scale after this step.
            extra.append((step + 1, math.nan, math.nan, math.nan, scale * scaler.get_backoff_factor()))
        recent = np.concatenate(list(self._recent)) if self._recent else None
        spike = diagnose(event, self._history.table(extra), batch, self.rules, recent)
        chosen = self.actions.get(spike.diagnosis, "log")
        blamed = spike.sample_ids if spike.diagnosis == "data" else []
        hashes, known = self._known(blamed, event.sample_ids, texts) if blamed else ({}, {})
        quarantined = self._quarantine(step, blamed, batch, hashes, known) if blamed else []
        losses = [] if batch is None else batch.column(C.LOSS).to_pylist()
        incident = Incident(
            step=step,
            diagnosis=spike.diagnosis,
            evidence=spike.evidence,
            recommended=spike.action,
            action=chosen,
            loss=_finite(event.loss),
            level=_finite(event.level),
            threshold=_finite(event.threshold),
            lr=rate,
            grad_norm=_finite(grad),
            loss_scale=scale,
            rank=self.rank,
            epoch=epoch,
            sample_ids=event.sample_ids,
            losses=[_finite(v) for v in losses],
            blamed=blamed,
            quarantined=quarantined,
            missing=spike.missing,
        )
        verdict = Verdict(
            step=step, incident=incident, skip=chosen in ("skip", "stop"), stop=chosen == "stop"
        )
        verdict.message = self._message(incident, chosen)
        self.incidents.append(incident)
        self._record(asdict(incident))
        logger.warning(verdict.message)
        return verdict

    def _batch_table(
        self, step: int, ids: Sequence[str], losses: np.ndarray | None, epoch: int | None
    ) -> pa.Table | None:
        if losses is None or len(losses) == 0:
            return None
        if len(losses) != len(ids):
            raise ValueError(f"step {step}: {len(ids)} sample ids but {len(losses)} losses")
        rows = len(losses)
        return pa.table(
            {
                C.SAMPLE_ID: pa.array([str(i) for i in ids], pa.string()),
                C.LOSS: pa.array(losses, pa.float64()),
                C.STEP: pa.array(np.full(rows, step), pa.int64()),
                C.EPOCH: pa.array([epoch] * rows, pa.int64()),
                C.RANK: pa.array([self.rank] * rows, pa.int64()),
                C.TOKENS: pa.nulls(rows, pa.int64()),
            },
            schema=S.LOSS_LOG_SCHEMA,
        )

    def _known(
        self, blamed: list[str], ids: list[str], texts: Sequence[str] | None
    ) -> tuple[dict[str, str], dict[str, str]]:
        """The text hashes and texts of the blamed samples: from the batch's texts, else the view,
        else the corpus (ids none of them has stay without)."""
        hashes: dict[str, str] = {}
        known: dict[str, str] = {}
        if texts is not None:
            if len(texts) != len(ids):
                raise ValueError(f"{len(ids)} sample ids but {len(texts)} texts")
            wanted = set(blamed)
            known = {i: t for i, t in zip(ids, texts, strict=True) if i in wanted and t is not None}
            hashes = {i: text_hash(t) for i, t in known.items()}
        hash_of = getattr(self.view, "text_hash_of", None)
        text_of = getattr(self.view, "text_of", None)
        for sample_id in blamed:
            if hash_of is not None and sample_id not in hashes:
                value = hash_of(sample_id)
                if value is not None:
                    hashes[sample_id] = value
            if text_of is not None and sample_id not in known:
                text = text_of(sample_id)
                if text is not None:
                    known[sample_id] = text
                    hashes.setdefault(sample_id, text_hash(text))
        lacking = [i for i in blamed if i not in hashes or i not in known]
        if lacking and self.corpus is not None:
            rows, _ = read_corpus_rows(Path(self.corpus), lacking)
            for row in rows.to_pylist():
                hashes.setdefault(row[C.ID], row[C.TEXT_HASH])
                known.setdefault(row[C.ID], row[C.TEXT])
        return hashes, known

    def _quarantine(
        self,
        step: int,
        blamed: list[str],
        batch: pa.Table | None,
        hashes: dict[str, str],
        texts: dict[str, str],
    ) -> list[str]:
        """Merge the blamed samples into the list file at once; returns the ids added."""
        scores: dict[str, float] = {}
        if batch is not None:
            losses = batch.column(C.LOSS).to_numpy(zero_copy_only=False)
            finite = np.isfinite(losses)
            if finite.any():
                z = robust_z(np.where(finite, losses, np.inf), losses[finite])
                scores = {
                    str(i): float(v) for i, v in zip(batch.column(C.SAMPLE_ID).to_pylist(), z, strict=True)
                }
        entries = [
            {
                C.SAMPLE_ID: sample_id,
                C.TEXT_HASH: hashes.get(sample_id),
                C.TEXT: texts.get(sample_id),
                C.REASON: f"spike:{step}",
                C.SCORE: scores.get(sample_id),
                C.FIRST_STEP: step,
                C.LAST_STEP: step,
                C.OCCURRENCES: 1,
                C.ACTION: "drop",
                C.SOURCE: "guard" if self.rank is None else f"guard:rank{self.rank}",
            }
            for sample_id in blamed
        ]
        merge_into(self.quarantine_path, make_list(entries))
        if self.view is not None:
            self.view.refresh()
        return blamed

    def _message(self, incident: Incident, chosen: str) -> str:
        def fmt(value: float | None) -> str:
            return "non-finite" if value is None else f"{value:.4g}"

        head = (
            f"dataclean guard: loss spike at step {incident.step} "
            f"(loss {fmt(incident.loss)}, level {fmt(incident.level)}): {incident.diagnosis}"
        )
        if incident.quarantined:
            head += f"; quarantined {len(incident.quarantined)} samples in {self.quarantine_path}"
        if chosen == "log":
            return head
        if chosen == "skip":
            return head + "; this step's update skipped"
        if chosen in ("watch", "rollback"):
            return head  # the playbook's decision follows
        before = [(s, p) for s, p in self.checkpoints if s <= incident.step]
        if before:
            incident.checkpoint_step, incident.checkpoint = max(before)
            where = (
                f"resume from {incident.checkpoint} (step {incident.checkpoint_step}, "
                "the last before the spike)"
            )
        else:
            where = "no checkpoint before the spike was noted: restart"
        tail = ""
        if incident.lr is not None:
            low, high = (incident.lr * f for f in RESUME_LR_FACTORS)
            incident.resume_lr = [low, high]
            tail = f" at lr {low:.3g}-{high:.3g} (0.1-0.3x the lr {incident.lr:.3g} at the spike)"
        return f"{head}; training stopped: {where}{tail}. Evidence in {self.incidents_path}"

    def close(self) -> None:
        """Flush the logs."""
        if self.loss_log is not None:
            self.loss_log.close()
        if self.step_log is not None:
            self.step_log.close()

    def __enter__(self) -> TrainingGuard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def drop_update(optimizer: Any) -> None:
    """Make the coming `optimizer.step()` a no-op: every parameter's gradient set to None."""
    for group in optimizer.param_groups:
        for parameter in group["params"]:
            parameter.grad = None
