"""A tiny real training run on the CPU for the playbook's tests, in process or as a script.

The model (an embedding and a linear layer: a bigram model) learns a small synthetic language
(or, given `data=`, real text as bytes: `byte_corpus`): each token is the
previous one plus 1 or 2, mod 32. Garbage samples (random tokens) are planted at chosen slots of
chosen steps' batches (`plan`: step -> number of garbage samples in that batch), so a batch with
four of them jumps about 4x while its other samples stay normal, and a batch with one is only a
little high. Plain SGD, so the lr each update used is measured from the update itself
(-(dw . g) / (g . g)), not read from the optimizer. The loop follows the guard's verdicts: a
rollback restarts the loader (the sampler continues where the restored checkpoint left it).

As a script (what `dataclean supervise` runs in the tests):

    python tiny_training.py FOLDER --steps 90 --plan 40:4 --sleep 0.05 [--resume_from_checkpoint CKPT]

writes the guard's logs to FOLDER, a checkpoint every 10 steps to FOLDER/checkpoints/ and, per
process, FOLDER/runs.jsonl: where it started, its lr factor, the ids it drew, the lr of each
update. Its sampler reads FOLDER/quarantine.parquet (the list `dataclean supervise` merges into).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dataclean.feedback.guard import TrainingGuard
from dataclean.feedback.monitor import SpikeMonitor
from dataclean.feedback.playbook import Playbook
from dataclean.feedback.sampler import DatasetQuarantine, QuarantinedDataset
from dataclean.feedback.torch_utils import per_sample_loss
from dataclean.feedback.training_state import TrainingState

VOCAB, LENGTH, BATCH, CLEAN = 32, 16, 16, 1600
SLOTS = (3, 7, 11, 15, 1, 5, 9, 13)  # where garbage goes in a batch, in this order
BASE_LR, TOTAL = 0.5, 300


def schedule(step: int) -> float:
    """The lr schedule's multiplier: linear decay from 1 to 0.4 over TOTAL steps."""
    return 1.0 - 0.6 * min(step, TOTAL) / TOTAL


CORRUPTIONS = ("random", "run", "reversed", "shifted")  # kinds of garbage, in turn when mixed


def corrupt(kind: str, rng: np.random.Generator) -> np.ndarray:
    """A garbage row of one kind: random tokens (random bytes), one token repeated (a junk run),
    the language backwards (each token the previous one minus 1 or 2: text read the wrong way),
    or the language with every other token replaced (mojibake: the structure half survives)."""
    if kind == "random":
        return rng.integers(0, VOCAB, LENGTH + 1)
    if kind == "run":
        return np.full(LENGTH + 1, rng.integers(0, VOCAB))
    steps = np.concatenate([[0], np.cumsum(1 + rng.integers(0, 2, LENGTH))])
    if kind == "reversed":
        return (rng.integers(0, VOCAB) - steps) % VOCAB
    row = (rng.integers(0, VOCAB) + steps) % VOCAB
    row[1::2] = rng.integers(0, VOCAB, len(row[1::2]))
    return row


def slots(count: int, batch: int = BATCH, seed: int = 0) -> list[int]:
    """Where a batch's `count` garbage samples go: `SLOTS` for the default batch and seed 0,
    otherwise positions drawn with `seed`."""
    if batch == BATCH and seed == 0 and count <= len(SLOTS):
        return sorted(SLOTS[:count])
    return sorted(int(k) for k in np.random.default_rng(seed + 1000).choice(batch, count, replace=False))


def corpus(
    plan: dict[int, int], batch: int = BATCH, seed: int = 0, kinds: tuple[str, ...] = ("random",)
) -> tuple[list[str], np.ndarray]:
    """Ids and token rows in the order the (unshuffled) sampler draws them; the garbage rows of
    each planted batch take the `kinds` in turn."""
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, VOCAB, CLEAN)
    steps = np.cumsum(1 + rng.integers(0, 2, (CLEAN, LENGTH)), axis=1)
    clean = (starts[:, None] + np.concatenate([np.zeros((CLEAN, 1), int), steps], axis=1)) % VOCAB
    ids = [f"s{k:04d}" for k in range(CLEAN)]
    rows = list(clean)
    for step in sorted(plan):
        for k, slot in enumerate(slots(plan[step], batch, seed)):
            position = step * batch + slot
            ids.insert(position, f"junk-{step}-{slot}")
            rows.insert(position, corrupt(kinds[k % len(kinds)], rng))
    return ids, np.stack(rows)


def text_of(row: np.ndarray) -> str:
    return " ".join(str(int(t)) for t in row)


class TinyRun:
    """The model, SGD with a LambdaLR schedule, a loader through the quarantine sampler, the
    guard with the whole state, and what happened: `drawn` (step, ids), `lrs` (step, lr used)."""

    def __init__(
        self,
        folder: Path,
        plan: dict[int, int],
        action: Any = "watch",
        playbook: Playbook | None = None,
        checkpoint_every: int = 10,
        guard_list: Path | None = None,
        batch: int = BATCH,
        seed: int = 0,
        kinds: tuple[str, ...] = ("random",),
        data: tuple[list[str], np.ndarray, dict[str, str]] | None = None,
        vocab: int = VOCAB,
        lr: float = BASE_LR,
        monitor: SpikeMonitor | None = None,
    ) -> None:
        torch.manual_seed(seed)
        self.folder = Path(folder)
        if data is None:
            self.ids, rows = corpus(plan, batch, seed, kinds)
            self.texts = {i: text_of(r) for i, r in zip(self.ids, rows, strict=True)}
        else:  # given rows (e.g. real text as bytes) with their texts
            self.ids, rows, self.texts = data
        self.model = torch.nn.Sequential(torch.nn.Embedding(vocab, 32), torch.nn.Linear(32, vocab))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, schedule)
        items = [{"sample_id": i, "tokens": r} for i, r in zip(self.ids, rows, strict=True)]
        self.view = DatasetQuarantine(self.ids, self.folder / "quarantine.parquet")
        self.dataset = QuarantinedDataset(items, self.view)
        self.sampler = self.dataset.sampler(shuffle=False)
        self.loader = torch.utils.data.DataLoader(self.dataset, batch_size=batch, sampler=self.sampler)
        self.state = TrainingState(self.model, self.optimizer, self.scheduler, self.sampler)
        self.guard = TrainingGuard(
            self.folder,
            action=action,
            monitor=monitor or SpikeMonitor(window=20, warmup=15, min_ratio=1.5),
            state=self.state,
            playbook=playbook,
            quarantine=guard_list,
        )
        self.checkpoint_every = checkpoint_every
        self.step = 0
        self.drawn: list[tuple[int, list[str]]] = []
        self.losses: dict[int, dict[str, float]] = {}  # step -> the batch's per-sample losses
        self.lrs: list[tuple[int, float]] = []
        self.verdicts: list[Any] = []
        self.checkpoints: dict[int, Path] = {}
        self.restored: dict[str, Any] | None = None  # the model's state right after a rollback

    def resume(self, path: str | Path) -> None:
        """Continue from a checkpoint file (as a relaunched process does)."""
        self.step = self.state.load(path)
        self.guard.note_checkpoint(path, self.step)

    def train(self, until: int, sleep: float = 0.0) -> Any:
        """Train until step `until`; returns the verdict that stopped it, if one did."""
        while self.step < until:
            for batch in self.loader:
                ids = list(batch["sample_id"])
                self.drawn.append((self.step, ids))
                tokens = batch["tokens"]
                losses = per_sample_loss(self.model(tokens[:, :-1]), tokens[:, 1:])
                loss = (losses * batch["weight"]).sum() / batch["weight"].sum()
                self.losses[self.step] = dict(zip(ids, losses.tolist(), strict=True))
                self.optimizer.zero_grad()
                loss.backward()
                texts = [self.texts[i] for i in ids]
                verdict = self.guard.check(self.step, loss, ids, losses, texts=texts)
                self.verdicts.append(verdict)
                if verdict.stop:
                    return verdict
                if verdict.rollback:
                    self.restored = {k: v.clone() for k, v in self.model.state_dict().items()}
                    self.step = verdict.resume_step
                    break  # restart the loader: the sampler is where the checkpoint left it
                weight = self.model[1].weight
                grad = None if weight.grad is None else weight.grad.detach().flatten().clone()
                before = weight.detach().clone()
                self.optimizer.step()
                moved = (weight.detach() - before).flatten()
                used = 0.0 if grad is None else float(-(moved @ grad) / (grad @ grad))
                self.lrs.append((self.step, used))
                self.scheduler.step()
                self.step += 1
                if self.step % self.checkpoint_every == 0:
                    path = self.folder / "checkpoints" / f"checkpoint-{self.step}.pt"
                    self.checkpoints[self.step] = self.guard.save_checkpoint(path, self.step)
                if sleep:
                    time.sleep(sleep)
                if self.step >= until:
                    break
        return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--steps", type=int, default=90)
    parser.add_argument("--plan", default="", help="STEP:COUNT,... garbage samples per batch")
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--resume_from_checkpoint", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    # `dataclean supervise` ends a run with SIGTERM: exit through `finally` (logs flushed).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    plan = {int(s): int(c) for s, c in (p.split(":") for p in args.plan.split(",") if p)}
    # The guard only logs here (`dataclean supervise` decides) and keeps its own list, so the
    # samples the sampler leaves out after a relaunch are those supervise put on the list.
    run = TinyRun(args.folder, plan, action="log", guard_list=args.folder / "guard-quarantine.parquet")
    if args.resume_from_checkpoint:
        run.resume(args.resume_from_checkpoint)
    record: dict[str, Any] = {
        "pid": os.getpid(),
        "start": run.step,
        "lr_factor": os.environ.get("DATACLEAN_LR_FACTOR"),
        "resumed_from": args.resume_from_checkpoint,
    }
    try:
        run.train(args.steps, sleep=args.sleep)
        record["finished"] = True
    finally:
        run.guard.close()
        record["drawn"] = [i for _, ids in run.drawn for i in ids]
        record["lrs"] = run.lrs
        with open(args.folder / "runs.jsonl", "a") as handle:
            handle.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
