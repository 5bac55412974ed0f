"""A real Hugging Face Trainer run for `dataclean supervise`'s test, as a script.

    python hf_training.py FOLDER --steps 60 [--resume_from_checkpoint FOLDER/out/checkpoint-N]

The tiny GPT-2 run of test_guard_hf.py (garbage in the batch of step 40, checkpoints every 10
steps in FOLDER/out), under `GuardedTrainer` with a guard that only logs (FOLDER/guard). Each
process appends to FOLDER/runs.jsonl: the step it started at, its lr factor, the ids it drew.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

import torch
import transformers

from dataclean.feedback.guard import TrainingGuard
from dataclean.feedback.monitor import SpikeMonitor
from tests.feedback.test_guard_hf import trainer_for


class Slow(transformers.TrainerCallback):
    """A pause per step, so the supervisor reads the logs while the run is still going."""

    def on_step_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--resume_from_checkpoint", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    guard = TrainingGuard(args.folder / "guard", monitor=SpikeMonitor(window=20, warmup=15))
    trainer = trainer_for(args.folder, guard, max_steps=args.steps)
    trainer.add_callback(Slow())
    drawn: list[str] = []
    record_batch = trainer.guard_callback.record

    def spy(sample_ids, losses, tokens):  # type: ignore[no-untyped-def]
        drawn.extend(sample_ids)
        record_batch(sample_ids, losses, tokens)

    trainer.guard_callback.record = spy
    record = {"pid": os.getpid(), "resumed_from": args.resume_from_checkpoint}
    record["lr_factor"] = os.environ.get("DATACLEAN_LR_FACTOR")
    try:
        trainer.train(resume_from_checkpoint=args.resume_from_checkpoint)
        record["finished"] = trainer.state.global_step
    finally:
        guard.close()
        record["drawn"] = drawn
        with open(args.folder / "runs.jsonl", "a") as handle:
            handle.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
