"""Train a tiny byte-level transformer on a dataclean output, logging per-sample losses.

The training loop is plain PyTorch on the CPU. What it adds for dataclean is one object, a
`TrainingGuard`, checked every step between `backward()` and `optimizer.step()`: it writes the
per-sample loss log (from `per_sample_loss`) and the step log (loss, lr, grad norm) that
`dataclean feedback` reads, catches a loss spike as it happens, diagnoses it, quarantines a data
spike's samples at once (LOG_DIR/quarantine.parquet, evidence in LOG_DIR/incidents.jsonl) and
skips that step's update. Samples are the first `seq_len` bytes of each text (UTF-8), so any
text, any language and any garbage is something the model can be trained on and measured by.

    python examples/feedback_loop/train.py CORPUS_DIR LOG_DIR [--epochs 3]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import pyarrow.dataset as ds
import torch
from torch import nn

from dataclean.feedback.guard import TrainingGuard
from dataclean.feedback.torch_utils import per_sample_loss

PAD = 256
VOCAB = 257


class TinyByteLM(nn.Module):
    """A 2-layer causal transformer over bytes (about 0.4 M parameters)."""

    def __init__(self, seq_len: int, width: int = 128, layers: int = 2, heads: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, width)
        self.position = nn.Parameter(torch.zeros(1, seq_len, width))
        layer = nn.TransformerEncoderLayer(
            width, heads, 4 * width, dropout=0.0, batch_first=True, norm_first=True
        )
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, VOCAB)
        mask = torch.triu(torch.full((seq_len, seq_len), float("-inf")), diagonal=1)
        self.register_buffer("mask", mask)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        length = tokens.shape[1]
        hidden = self.embed(tokens) + self.position[:, :length]
        hidden = self.blocks(hidden, mask=self.mask[:length, :length], is_causal=True)
        return self.head(self.norm(hidden))


def encode(texts: list[str], seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and next-byte labels ([n, seq_len] each); padding is labelled -100."""
    tokens = np.full((len(texts), seq_len + 1), PAD, dtype=np.int64)
    for row, text in enumerate(texts):
        data = np.frombuffer(text.encode("utf-8")[: seq_len + 1], dtype=np.uint8)
        tokens[row, : len(data)] = data
    tokens_t = torch.from_numpy(tokens)
    labels = tokens_t[:, 1:].clone()
    labels[labels == PAD] = -100
    return tokens_t[:, :-1], labels


def read_texts(path: Path) -> tuple[list[str], list[str]]:
    """(ids, texts) from a dataclean output folder (OUT/data) or a JSONL file."""
    if path.suffix == ".jsonl":
        with open(path, encoding="utf-8") as handle:  # not splitlines(): texts hold U+2028, \x85
            rows = [json.loads(line) for line in handle if line.strip()]
        return [r["id"] for r in rows], [r["text"] for r in rows]
    folder = path / "data" if (path / "data").is_dir() else path
    table = ds.dataset(folder, format="parquet").to_table(columns=["id", "text"])
    return table.column("id").to_pylist(), table.column("text").to_pylist()


@torch.no_grad()
def evaluate(model: nn.Module, texts: list[str], seq_len: int) -> float:
    """Mean per-byte loss on held-out texts."""
    model.eval()
    inputs, labels = encode(texts, seq_len)
    losses, tokens = per_sample_loss(model(inputs), labels, return_tokens=True)
    model.train()
    return float((losses * tokens).sum() / tokens.sum())


def train(
    corpus: Path,
    logs: Path,
    heldout: Path | None = None,
    epochs: int = 3,
    batch_size: int = 32,
    seq_len: int = 128,
    lr: float = 3e-3,
    seed: int = 0,
    inject: dict[int, list[tuple[str, str]]] | None = None,
    guard_action: str | dict[str, str] | None = None,
) -> dict[str, list[float]]:
    """Train; write logs/losses/ and logs/steps/; return the loss curves for plotting.

    `inject`: step -> (id, text) records added to that step's batch (the example's data spike:
    records that never went through cleaning, as a loader bug or an unfiltered shard delivers).
    `guard_action`: what the guard does on a spike (default: skip a data spike's update).
    """
    torch.manual_seed(seed)
    torch.set_num_threads(2)
    ids, texts = read_texts(corpus)
    inputs, labels = encode(texts, seq_len)
    held = read_texts(heldout)[1] if heldout else []
    model = TinyByteLM(seq_len)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    steps_per_epoch = len(ids) // batch_size
    total = epochs * steps_per_epoch
    warmup = max(total // 20, 1)

    def schedule(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / (total - warmup)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    # dataclean's guard: per-sample and step logs (logs/losses, logs/steps), spikes caught and
    # diagnosed live (logs/incidents.jsonl), a data spike's samples quarantined at once
    # (logs/quarantine.parquet) and, with action "skip", its update dropped.
    guard = TrainingGuard(logs, action=guard_action or {"data": "skip"})
    curve: dict[str, list[float]] = {"step": [], "loss": [], "heldout_step": [], "heldout": []}
    generator = torch.Generator().manual_seed(seed)
    step, started = 0, time.monotonic()
    for epoch in range(epochs):
        order = torch.randperm(len(ids), generator=generator)
        for start in range(0, len(ids) - batch_size + 1, batch_size):  # whole batches only
            rows = order[start : start + batch_size]
            batch_ids = [ids[i] for i in rows.tolist()]
            batch_inputs, batch_labels = inputs[rows], labels[rows]
            if inject and step in inject:
                extra_inputs, extra_labels = encode([text for _, text in inject[step]], seq_len)
                batch_ids += [sample_id for sample_id, _ in inject[step]]
                batch_inputs = torch.cat([batch_inputs, extra_inputs])
                batch_labels = torch.cat([batch_labels, extra_labels])
            losses, tokens = per_sample_loss(model(batch_inputs), batch_labels, return_tokens=True)
            loss = (losses * tokens).sum() / tokens.sum().clamp(min=1)
            optimizer.zero_grad()
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            current_lr = scheduler.get_last_lr()[0]
            guard.check(
                step,
                loss,
                batch_ids,
                losses,
                grad_norm=grad_norm,
                lr=current_lr,
                optimizer=optimizer,
                tokens=tokens,
                epoch=epoch,
            )
            optimizer.step()  # changes nothing when the guard skipped this step
            scheduler.step()
            curve["step"].append(step)
            curve["loss"].append(loss.item())
            if held and (step % 50 == 0 or step == total - 1):
                curve["heldout_step"].append(step)
                curve["heldout"].append(evaluate(model, held, seq_len))
            step += 1
        print(
            f"  epoch {epoch}: step {step}/{total}, loss {curve['loss'][-1]:.3f}, "
            f"{time.monotonic() - started:.0f} s"
        )
    guard.close()
    (logs / "curve.json").write_text(json.dumps(curve))
    return curve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", type=Path, help="dataclean output folder or a JSONL file")
    parser.add_argument("logs", type=Path, help="folder for losses/, steps/ and curve.json")
    parser.add_argument("--heldout", type=Path, help="JSONL of clean texts to evaluate on")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seq-len", type=int, default=128)
    args = parser.parse_args()
    train(args.corpus, args.logs, args.heldout, epochs=args.epochs, seq_len=args.seq_len)


if __name__ == "__main__":
    main()
