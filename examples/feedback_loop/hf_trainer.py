"""The training guard and per-sample loss logs in a Hugging Face `Trainer`, for `dataclean feedback`.

    python examples/feedback_loop/hf_trainer.py CLEANED_OUT LOG_DIR [--steps 40] [--action log]
    dataclean supervise --logs LOG_DIR --checkpoints LOG_DIR/trainer -- \
        python examples/feedback_loop/hf_trainer.py CLEANED_OUT LOG_DIR --steps 400 --save-steps 50

trains a tiny GPT-2 (built from a config: no download) with a byte-level "tokenizer" on a
cleaned corpus under `GuardedTrainer`, then prints the `dataclean feedback` command for its logs.
The guard (`TrainingGuard(LOG_DIR, action=...)`) writes what that command reads, the per-sample
loss log (LOG_DIR/losses) and the step log (LOG_DIR/steps), and LOG_DIR/incidents.jsonl for the
spikes it sees live. With `--action skip` it also skips the update of a step whose spike the data
explains and quarantines the samples behind it at once (LOG_DIR/quarantine.parquet). Under
`dataclean supervise` (the second line) a spike kills the run, which is relaunched from the last
checkpoint before it with `--resume_from_checkpoint` at a lower lr, ramped back by the guard.

What a dataset needs:
1. dataclean's `id` as a `sample_id` column; `QuarantinedDataset` leaves listed samples out and
   gives each item a `weight` (down-weighted samples count less);
2. `remove_unused_columns=False` and a collator that passes `sample_id` (a list) and `weight`
   through: `GuardedTrainer.compute_loss` takes them out before the model sees the batch.

Needs `pip install "dataclean[hf]"` (transformers and accelerate) and torch.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import torch
from transformers import GPT2Config, GPT2LMHeadModel, TrainingArguments

from dataclean.feedback.guard import TrainingGuard
from dataclean.feedback.guard_hf import GuardedTrainer
from dataclean.feedback.sampler import WEIGHT_KEY, DatasetQuarantine, QuarantinedDataset

PAD = 256  # bytes are tokens 0-255


def byte_collator(seq_len: int):  # type: ignore[no-untyped-def]
    """Bytes as tokens (256 = padding); `sample_id` passes through as a list, `weight` as a tensor."""

    def collate(features: list[dict[str, Any]]) -> dict[str, Any]:
        ids = torch.full((len(features), seq_len), PAD, dtype=torch.long)
        for row, feature in enumerate(features):
            data = feature["text"].encode("utf-8")[:seq_len]
            ids[row, : len(data)] = torch.tensor(list(data), dtype=torch.long)
        labels = ids.clone()
        labels[ids == PAD] = -100
        return {
            "input_ids": ids,
            "attention_mask": (ids != PAD).long(),
            "labels": labels,
            "sample_id": [feature["sample_id"] for feature in features],
            WEIGHT_KEY: torch.tensor([feature[WEIGHT_KEY] for feature in features]),
        }

    return collate


def main(
    corpus: Path,
    logs: Path,
    steps: int = 40,
    action: str = "log",
    seq_len: int = 128,
    save_steps: int = 0,
    resume_from_checkpoint: str | None = None,
) -> None:
    from datasets import Dataset

    folder = corpus / "data" if (corpus / "data").is_dir() else corpus
    table = ds.dataset(folder, format="parquet").to_table(columns=["id", "text"])
    dataset = Dataset.from_dict(
        {"sample_id": table.column("id").to_pylist(), "text": table.column("text").to_pylist()}
    )
    guard = TrainingGuard(logs, action=action)
    data = QuarantinedDataset(dataset, DatasetQuarantine.from_dataset(dataset, guard.quarantine_path))
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=PAD + 1, n_positions=seq_len, n_embd=64, n_layer=2, n_head=4)
    model = GPT2LMHeadModel(config)
    arguments = TrainingArguments(
        output_dir=str(logs / "trainer"),
        per_device_train_batch_size=16,
        max_steps=steps,
        learning_rate=1e-3,
        logging_steps=steps,
        remove_unused_columns=False,  # keep sample_id and weight for compute_loss
        report_to=[],
        save_strategy="steps" if save_steps else "no",  # LOG_DIR/trainer/checkpoint-N
        save_steps=save_steps or 500,
        use_cpu=True,
        disable_tqdm=True,
    )
    trainer = GuardedTrainer(
        model=model, args=arguments, train_dataset=data, data_collator=byte_collator(seq_len), guard=guard
    )
    trainer.train(resume_from_checkpoint=resume_from_checkpoint)
    print(
        f"dataclean feedback --losses {logs / 'losses'} --steps {logs / 'steps'} --corpus {corpus}"
        f" -o {logs / 'feedback'}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, help="a dataclean output folder (or its data/)")
    parser.add_argument("logs", type=Path)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--action", default="log", choices=["log", "skip", "stop", "watch", "rollback"])
    parser.add_argument("--save-steps", type=int, default=0, help="checkpoint every N steps (0: none)")
    parser.add_argument("--resume_from_checkpoint", help="LOG_DIR/trainer/checkpoint-N to resume from")
    options = parser.parse_args()
    main(
        options.corpus,
        options.logs,
        options.steps,
        options.action,
        save_steps=options.save_steps,
        resume_from_checkpoint=options.resume_from_checkpoint,
    )
