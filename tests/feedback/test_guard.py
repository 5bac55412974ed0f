"""The training guard on a tiny real PyTorch run on the CPU, with a data spike injected.

The model learns a small synthetic language (each token is the previous one plus 1 or 2, mod 32);
four garbage samples (random tokens) sit together in the batch of step 40, so that batch's loss
jumps about 4x while its other samples stay normal. The answer key (which rows are garbage) is
set by the test, never taken from the guard.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from dataclean.feedback.guard import TrainingGuard  # noqa: E402
from dataclean.feedback.monitor import SpikeMonitor  # noqa: E402
from dataclean.feedback.sampler import DatasetQuarantine, QuarantinedDataset  # noqa: E402
from dataclean.feedback.torch_utils import per_sample_loss  # noqa: E402
from dataclean.quarantine.lists import read_list  # noqa: E402

# One thread: on a shared 2-core machine torch's thread pool spins against other processes and
# a tiny model trains 20x slower with two threads than with one.
torch.set_num_threads(1)

VOCAB, LENGTH, BATCH, CLEAN = 32, 16, 16, 768
SPIKE_STEP = 40
JUNK_SLOTS = (3, 7, 11, 15)  # positions of the garbage samples in the spike step's batch
JUNK_IDS = [f"junk-{k}" for k in range(len(JUNK_SLOTS))]


def corpus() -> tuple[list[str], np.ndarray]:
    """Ids and token rows, in the order the (unshuffled) sampler draws them."""
    rng = np.random.default_rng(0)
    starts = rng.integers(0, VOCAB, CLEAN)
    steps = np.cumsum(1 + rng.integers(0, 2, (CLEAN, LENGTH)), axis=1)
    clean = (starts[:, None] + np.concatenate([np.zeros((CLEAN, 1), int), steps], axis=1)) % VOCAB
    ids = [f"s{k:04d}" for k in range(CLEAN)]
    rows = list(clean)
    for slot, junk_id in zip(JUNK_SLOTS, JUNK_IDS, strict=True):
        position = SPIKE_STEP * BATCH + slot
        ids.insert(position, junk_id)
        rows.insert(position, rng.integers(0, VOCAB, LENGTH + 1))
    return ids, np.stack(rows)


class Run:
    """A tiny model, its optimizer and a loader drawing through the quarantine sampler."""

    def __init__(self, list_path: Path, scaler: bool = False) -> None:
        torch.manual_seed(0)
        self.ids, rows = corpus()
        self.model = torch.nn.Sequential(torch.nn.Embedding(VOCAB, 32), torch.nn.Linear(32, VOCAB))
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=0.05)
        self.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16) if scaler else None
        items = [{"sample_id": i, "tokens": r} for i, r in zip(self.ids, rows, strict=True)]
        self.view = DatasetQuarantine(self.ids, list_path)
        self.dataset = QuarantinedDataset(items, self.view)
        self.sampler = self.dataset.sampler(shuffle=False)
        self.loader = torch.utils.data.DataLoader(self.dataset, batch_size=BATCH, sampler=self.sampler)
        self.drawn: list[str] = []
        self.step = 0

    def state(self) -> dict:
        return {
            "model": {k: v.clone() for k, v in self.model.state_dict().items()},
            "optimizer": _clone(self.optimizer.state_dict()),
            "sampler": self.sampler.state_dict(),
        }

    def train(self, guard, steps=None, hooks=None):
        """Train up to `steps` steps (default: to the end of the epoch); `hooks[step](run, phase)`
        runs at "forward", "backward" (before unscaling) and "end" (after the optimizer step)."""
        hooks = hooks or {}
        last = None if steps is None else self.step + steps
        for batch in self.loader:
            hook = hooks.get(self.step, lambda run, phase: None)
            self.drawn += batch["sample_id"]
            hook(self, "forward")
            tokens = batch["tokens"]
            losses = per_sample_loss(self.model(tokens[:, :-1]), tokens[:, 1:])
            loss = (losses * batch["weight"]).sum() / batch["weight"].sum()
            self.optimizer.zero_grad()
            (self.scaler.scale(loss) if self.scaler else loss).backward()
            hook(self, "backward")
            if self.scaler:
                self.scaler.unscale_(self.optimizer)
            grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            verdict = guard.check(
                self.step,
                loss,
                batch["sample_id"],
                losses,
                grad_norm=grad_norm,
                optimizer=self.optimizer,
                scaler=self.scaler,
            )
            if verdict.stop:
                return verdict
            if self.scaler:
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                self.optimizer.step()
            hook(self, "end")
            self.step += 1
            if last is not None and self.step >= last:
                break
        return None


def _clone(value):
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clone(v) for v in value]
    return value.clone() if hasattr(value, "clone") else value


def _equal(first, second) -> bool:
    if isinstance(first, dict):
        return first.keys() == second.keys() and all(_equal(first[k], second[k]) for k in first)
    if isinstance(first, list):
        return len(first) == len(second) and all(_equal(a, b) for a, b in zip(first, second, strict=True))
    if hasattr(first, "shape"):
        return bool(torch.equal(first, second))
    return bool(first == second)


def monitor() -> SpikeMonitor:
    return SpikeMonitor(window=20, warmup=15)


def test_guard_catches_the_data_spike_live_and_quarantines_exactly_the_injected_samples(tmp_path):
    guard = TrainingGuard(tmp_path / "guard", monitor=monitor())
    run = Run(tmp_path / "guard" / "quarantine.parquet")
    seen = {}

    def look(run, phase):  # the quarantine list at the spike step, before and after the guard ran
        seen[phase] = (tmp_path / "guard" / "quarantine.parquet").exists()

    run.train(guard, 45, hooks={SPIKE_STEP: look})
    guard.close()
    assert seen == {"forward": False, "backward": False, "end": True}
    assert [i.step for i in guard.incidents] == [SPIKE_STEP]
    incident = guard.incidents[0]
    assert incident.diagnosis == "data", incident.evidence
    assert sorted(incident.blamed) == JUNK_IDS
    listed = read_list(guard.quarantine_path)
    assert sorted(listed.column("sample_id").to_pylist()) == JUNK_IDS
    assert set(listed.column("reason").to_pylist()) == {f"spike:{SPIKE_STEP}"}
    record = json.loads((tmp_path / "guard" / "incidents.jsonl").read_text())
    assert record["step"] == SPIKE_STEP and record["diagnosis"] == "data"
    assert len(record["sample_ids"]) == len(record["losses"]) == BATCH
    assert set(JUNK_IDS) <= set(record["sample_ids"])
    assert record["grad_norm"] > 0 and record["lr"] == pytest.approx(0.05)
    # The view saw the new list at once: those rows now weigh 0 and are left out.
    assert run.view.excluded.sum() == len(JUNK_IDS)


def test_skip_leaves_weights_and_optimizer_state_as_they_were(tmp_path):
    guard = TrainingGuard(tmp_path / "guard", action={"data": "skip"}, monitor=monitor(), log=False)
    run = Run(tmp_path / "guard" / "quarantine.parquet")
    states = {}

    def snapshot(run, phase):
        if phase == "forward":
            states["before"] = run.state()

    run.train(guard, SPIKE_STEP + 1, hooks={SPIKE_STEP: snapshot})
    assert guard.incidents[0].action == "skip"
    after = run.state()
    assert _equal(states["before"]["model"], after["model"])  # torch.equal, parameter by parameter
    assert _equal(states["before"]["optimizer"], after["optimizer"])
    # A normal step does change them (the check above is not vacuous).
    run.train(guard, 1)
    moved = run.state()
    assert not _equal(after["model"], moved["model"])
    assert not _equal(after["optimizer"], moved["optimizer"])


def test_resumed_run_with_the_sampler_never_draws_a_quarantined_sample(tmp_path):
    list_path = tmp_path / "guard" / "quarantine.parquet"
    guard = TrainingGuard(tmp_path / "guard", monitor=monitor(), log=False)
    run = Run(list_path)
    checkpoint = {}

    def save(run, phase):
        if phase == "end":  # a checkpoint after step 29: training resumes at step 30
            checkpoint.update(run.state())
            guard.note_checkpoint("ckpt-30", 30)

    run.train(guard, SPIKE_STEP + 2, hooks={29: save})
    assert sorted(read_list(list_path).column("sample_id").to_pylist()) == JUNK_IDS
    # Resume from the checkpoint with new objects (as a new process would), the list in place.
    resumed = Run(list_path)
    resumed.model.load_state_dict(checkpoint["model"])
    resumed.optimizer.load_state_dict(checkpoint["optimizer"])
    resumed.sampler.load_state_dict(checkpoint["sampler"])
    resumed.step = 30
    assert resumed.sampler.position == 30 * BATCH
    other = TrainingGuard(tmp_path / "guard2", monitor=monitor(), log=False)
    resumed.train(other)  # the rest of epoch 0, where the garbage batch was
    resumed.train(other)  # and all of epoch 1
    drawn = resumed.drawn
    assert not set(drawn) & set(JUNK_IDS)
    # Every other sample of the rest of epoch 0 is drawn once, then every sample in epoch 1.
    clean_ids = [i for i in run.ids if i not in JUNK_IDS]
    rest = [i for i in run.ids[30 * BATCH :] if i not in JUNK_IDS]
    assert sorted(drawn) == sorted(rest + clean_ids)
    assert other.incidents == []  # without the garbage batch, no spike


def test_stop_ends_the_run_naming_the_checkpoint_and_the_learning_rate(tmp_path):
    guard = TrainingGuard(tmp_path / "guard", action="stop", monitor=monitor(), log=False)
    run = Run(tmp_path / "guard" / "quarantine.parquet")
    guard.note_checkpoint("ckpt-20", 20)
    guard.note_checkpoint("ckpt-35", 35)
    verdict = run.train(guard, 100)
    assert verdict is not None and verdict.stop and verdict.step == SPIKE_STEP
    assert "resume from ckpt-35 (step 35" in verdict.message
    assert "at lr 0.005-0.015" in verdict.message
    record = json.loads((tmp_path / "guard" / "incidents.jsonl").read_text())
    assert record["checkpoint"] == "ckpt-35" and record["resume_lr"] == pytest.approx([0.005, 0.015])
    assert all(p.grad is None for p in run.model.parameters())  # the spike step's update was dropped


def test_fp16_loss_scale_collapse_is_an_optimizer_event_and_quarantines_nothing(tmp_path):
    list_path = tmp_path / "guard" / "quarantine.parquet"
    guard = TrainingGuard(tmp_path / "guard", monitor=monitor())
    run = Run(list_path, scaler=True)

    def overflow(run, phase):  # gradients overflow in fp16: the real GradScaler halves its scale
        if phase == "backward":
            next(run.model.parameters()).grad[0, 0] = float("inf")

    def diverge(run, phase):  # then the whole batch's loss jumps (the weights were knocked off)
        if phase == "forward":
            with torch.no_grad():
                run.model[1].weight.mul_(-4.0)

    hooks = {step: overflow for step in range(24, 29)} | {30: diverge}
    run.train(guard, 32, hooks=hooks)
    guard.close()
    assert run.scaler.get_scale() == 2.0**16 / 2**5
    incidents = {i.step: i for i in guard.incidents}
    assert 30 in incidents, [(i.step, i.diagnosis) for i in guard.incidents]
    assert incidents[30].diagnosis == "fp16_overflow", incidents[30].evidence
    assert all(i.diagnosis != "data" for i in guard.incidents)
    assert not list_path.exists()
    assert incidents[30].quarantined == [] and incidents[30].loss_scale == 2.0**11


def test_the_guards_logs_give_dataclean_feedback_the_same_spike(tmp_path):
    guard = TrainingGuard(tmp_path / "guard", monitor=monitor())
    Run(tmp_path / "guard" / "quarantine.parquet").train(guard, 45)
    guard.close()
    from dataclean.feedback.analysis.analyze import Settings, analyze

    found = analyze(
        tmp_path / "guard" / "losses", tmp_path / "guard" / "steps", settings=Settings(spike_window=20)
    )
    spikes = {s.step: s for s in found.spikes}
    assert spikes[SPIKE_STEP].diagnosis == guard.incidents[0].diagnosis == "data"
    assert sorted(spikes[SPIKE_STEP].sample_ids) == sorted(guard.incidents[0].blamed) == JUNK_IDS


def test_listed_entries_keep_the_text_and_hash_from_the_corpus(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dataclean.ids import text_hash

    ids, rows = corpus()
    texts = {i: " ".join(str(int(t)) for t in row) for i, row in zip(ids, rows, strict=True)}
    (tmp_path / "out" / "data").mkdir(parents=True)
    table = pa.table({"id": list(texts), "text": list(texts.values())})
    pq.write_table(table, tmp_path / "out" / "data" / "part-0.parquet")
    guard = TrainingGuard(tmp_path / "guard", monitor=monitor(), log=False, corpus=tmp_path / "out")
    Run(tmp_path / "guard" / "quarantine.parquet").train(guard, 45)
    listed = read_list(guard.quarantine_path).to_pylist()
    assert sorted(r["sample_id"] for r in listed) == JUNK_IDS
    assert all(r["text"] == texts[r["sample_id"]] for r in listed)
    assert all(r["text_hash"] == text_hash(texts[r["sample_id"]]) for r in listed)
