"""Per-sample loss logging in a Hugging Face `Trainer`, for `dataclean feedback`.

Three changes to an ordinary causal-LM fine-tune:
1. the dataset keeps dataclean's `id` as a `sample_id` column, and `remove_unused_columns=False`
   with a collator that passes the ids through as a list (they never reach the model);
2. `compute_loss` computes each sample's loss with `per_sample_loss` and logs it;
3. a callback writes the step log (loss, lr, grad norm) that the Trainer reports every
   `logging_steps`.

    python examples/feedback_loop/hf_trainer.py CLEANED_OUT LOG_DIR

trains a tiny GPT-2 (built from a config: no download) with a byte-level "tokenizer" on the
cleaned corpus, then `dataclean feedback --losses LOG_DIR/losses --steps LOG_DIR/steps ...`.
Needs `pip install transformers accelerate` (not dataclean dependencies).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

from dataclean.feedback import LossLogWriter, StepLogWriter
from dataclean.feedback.torch_utils import per_sample_loss


class FeedbackTrainer(Trainer):
    """A Trainer that logs every sample's loss to a dataclean loss log."""

    def __init__(self, *args: Any, loss_log: LossLogWriter, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.loss_log = loss_log

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):  # type: ignore[no-untyped-def]
        sample_ids = inputs.pop("sample_id")
        labels = inputs.pop("labels")
        outputs = model(**inputs)
        losses, tokens = per_sample_loss(outputs.logits, labels, shift=True, return_tokens=True)
        # The usual token-mean loss; with gradient accumulation divide by the whole step's tokens.
        denominator = num_items_in_batch if num_items_in_batch is not None else tokens.sum()
        loss = (losses * tokens).sum() / torch.as_tensor(denominator).clamp(min=1)
        if model.training:
            self.loss_log.log(
                self.state.global_step,
                sample_ids,
                losses,
                epoch=int(self.state.epoch or 0),
                tokens=tokens,
            )
        return (loss, outputs) if return_outputs else loss


class StepLogCallback(TrainerCallback):
    """Writes the Trainer's periodic logs (loss, learning_rate, grad_norm) as a step log."""

    def __init__(self, writer: StepLogWriter) -> None:
        self.writer = writer

    def on_log(self, args, state, control, logs=None, **kwargs):  # type: ignore[no-untyped-def]
        if logs and "loss" in logs:
            # global_step has already counted this step; compute_loss logged it one lower.
            self.writer.log(
                state.global_step - 1,
                logs["loss"],
                lr=logs.get("learning_rate"),
                grad_norm=logs.get("grad_norm"),
            )

    def on_train_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
        self.writer.close()


def byte_collator(seq_len: int):  # type: ignore[no-untyped-def]
    """Bytes as tokens (0-255, 256 = padding); `sample_id` passes through as a list."""

    def collate(features: list[dict[str, Any]]) -> dict[str, Any]:
        ids = torch.full((len(features), seq_len), 256, dtype=torch.long)
        for row, feature in enumerate(features):
            data = feature["text"].encode("utf-8")[:seq_len]
            ids[row, : len(data)] = torch.tensor(list(data), dtype=torch.long)
        labels = ids.clone()
        labels[ids == 256] = -100
        return {
            "input_ids": ids,
            "attention_mask": (ids != 256).long(),
            "labels": labels,
            "sample_id": [feature["sample_id"] for feature in features],
        }

    return collate


def main(corpus: Path, logs: Path, seq_len: int = 128) -> None:
    from datasets import Dataset

    folder = corpus / "data" if (corpus / "data").is_dir() else corpus
    table = ds.dataset(folder, format="parquet").to_table(columns=["id", "text"])
    dataset = Dataset.from_dict(
        {"sample_id": table.column("id").to_pylist(), "text": table.column("text").to_pylist()}
    )
    model = GPT2LMHeadModel(GPT2Config(vocab_size=257, n_positions=seq_len, n_embd=64, n_layer=2, n_head=4))
    loss_log = LossLogWriter(logs / "losses")
    arguments = TrainingArguments(
        output_dir=str(logs / "trainer"),
        per_device_train_batch_size=16,
        num_train_epochs=1,
        max_steps=40,
        learning_rate=1e-3,
        logging_steps=1,
        remove_unused_columns=False,  # keep sample_id for compute_loss
        report_to=[],
        save_strategy="no",
        use_cpu=True,
    )
    trainer = FeedbackTrainer(
        model=model,
        args=arguments,
        train_dataset=dataset,
        data_collator=byte_collator(seq_len),
        callbacks=[StepLogCallback(StepLogWriter(logs / "steps"))],
        loss_log=loss_log,
    )
    trainer.train()
    loss_log.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
