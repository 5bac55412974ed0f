"""The feedback loop on packed sequences: a data spike traced to the samples inside packed rows.

    python examples/feedback_loop/packed.py [--work out/feedback_loop_packed] [--epochs 3]

The same corpus and cleaning as run.py, then, as pretraining does it:
1. `dataclean pack` the kept rows into sequences of 512 byte tokens (whole samples, best-fit);
2. train a tiny byte-level transformer on the packed rows (`PackedDataset`, `collate_packed`),
   with a block-diagonal causal mask from the rows' `position_ids` (`packed_attention_mask`), one
   loss per sample segment (`per_sample_loss(..., position_ids=...)`) and the `TrainingGuard`
   checked every step; in the middle of the last epoch a corrupt shard read adds packed rows of
   binary records to one batch: a data spike inside packed rows;
   (the corpus is cleaned with `--max-chars 250`, so samples are 2-4 to a row; the answer key
   follows the split: a chunk of an injected document is injected)
3. `dataclean feedback` on the logs: the spike must be named `data` and blamed on exactly those
   records, by the guard live too, and the quarantine list is scored against the answer key;
4. `dataclean pack --quarantine LIST` repacks without the listed samples.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import torch
from torch import nn

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]

import corpus  # noqa: E402
import run  # noqa: E402

from dataclean.feedback.guard import TrainingGuard  # noqa: E402
from dataclean.feedback.torch_utils import (  # noqa: E402
    PackedDataset,
    collate_packed,
    packed_attention_mask,
    per_sample_loss,
)

SEQ_LEN = 512
MAX_CHARS = 250  # the split stage cuts the corpus's 300-600-character paragraphs: 2-4 samples per row
BATCH_ROWS = 4
SPIKE_RECORDS = 8
VOCAB = 258  # dataclean pack's bytes tokenizer: 0-255, end-of-sample 256, padding 257


class Block(nn.Module):
    """Pre-norm attention + MLP; attention through `scaled_dot_product_attention` with the mask."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.out = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        batch, length, width = hidden.shape
        qkv = self.qkv(self.norm1(hidden)).view(batch, length, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        attended = nn.functional.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], attn_mask=mask)
        hidden = hidden + self.out(attended.transpose(1, 2).reshape(batch, length, width))
        return hidden + self.mlp(self.norm2(hidden))


class PackedByteLM(nn.Module):
    """A 2-layer causal transformer over bytes whose attention stays inside each sample: the
    block-diagonal causal mask comes from the rows' position ids (`packed_attention_mask`)."""

    def __init__(self, width: int = 64, layers: int = 2, heads: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, width)
        self.position = nn.Embedding(SEQ_LEN, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, VOCAB)

    def forward(self, tokens: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        mask = packed_attention_mask(position_ids)
        hidden = self.embed(tokens) + self.position(position_ids)
        for block in self.blocks:
            hidden = block(hidden, mask)
        return self.head(self.norm(hidden))


def train_packed(
    packed: Path, logs: Path, epochs: int, inject: dict[int, Path] | None = None, seed: int = 0
) -> dict[str, list[float]]:
    """Train on PACKED rows, guarded; `inject`: step -> a PACKED folder whose rows join that batch."""
    torch.manual_seed(seed)
    torch.set_num_threads(2)
    dataset = PackedDataset(packed)
    model = PackedByteLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    steps_per_epoch = len(dataset) // BATCH_ROWS
    total = epochs * steps_per_epoch
    warmup = max(total // 20, 1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: (
            (s + 1) / warmup
            if s < warmup
            else 0.1 + 0.45 * (1 + math.cos(math.pi * (s - warmup) / (total - warmup)))
        ),
    )
    guard = TrainingGuard(logs, action={"data": "skip"})
    curve: dict[str, list[float]] = {"step": [], "loss": []}
    generator = torch.Generator().manual_seed(seed)
    step, started = 0, time.monotonic()
    for epoch in range(epochs):
        order = torch.randperm(len(dataset), generator=generator).tolist()
        for start in range(0, steps_per_epoch * BATCH_ROWS, BATCH_ROWS):
            items = [dataset[i] for i in order[start : start + BATCH_ROWS]]
            if inject and step in inject:
                extra = PackedDataset(inject[step])
                items += [extra[i] for i in range(len(extra))]
            batch = collate_packed(items)
            logits = model(batch["input_ids"], batch["position_ids"])
            losses, tokens = per_sample_loss(
                logits, batch["labels"], shift=True, return_tokens=True, position_ids=batch["position_ids"]
            )
            loss = (losses * tokens).sum() / tokens.sum().clamp(min=1)
            optimizer.zero_grad()
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            guard.check(
                step,
                loss,
                batch["sample_id"],  # every sample of every row, in the order of the losses
                losses,
                grad_norm=grad_norm,
                lr=scheduler.get_last_lr()[0],
                optimizer=optimizer,
                tokens=tokens,
                epoch=epoch,
            )
            optimizer.step()
            scheduler.step()
            curve["step"].append(step)
            curve["loss"].append(loss.item())
            step += 1
        print(
            f"  epoch {epoch}: step {step}/{total}, loss {curve['loss'][-1]:.3f}, "
            f"{time.monotonic() - started:.0f} s"
        )
    guard.close()
    (logs / "curve.json").write_text(json.dumps(curve))
    return curve


def pack(source: Path, target: Path, *extra: str) -> dict[str, object]:
    run.dataclean(
        "pack",
        str(source),
        "-o",
        str(target),
        "--tokenizer",
        "bytes",
        "--seq-len",
        str(SEQ_LEN),
        "--executor",
        "local",
        "--overwrite",
        *extra,
    )
    summary: dict[str, object] = json.loads((target / "pack.json").read_text())
    return summary


def chunks_inherit(output: Path, injected: dict[str, str]) -> dict[str, str]:
    """The answer key by sample: a chunk of a split injected document is injected, of its kind
    (its parent id, no longer a sample, leaves the key)."""
    key = dict(injected)
    for folder in ("data", "excluded"):
        if not any((output / folder).glob("*.parquet")):
            continue
        table = pq.read_table(output / folder)
        if "parent_id" not in table.column_names:
            continue
        ids, parents = table.column("id").to_pylist(), table.column("parent_id").to_pylist()
        for sample_id, parent in zip(ids, parents, strict=True):
            if parent in injected and sample_id != parent:
                key[sample_id] = injected[parent]
                key.pop(parent, None)
    (output.parent / "injected.json").write_text(json.dumps(key, indent=1))
    return key


def first_pass(work: Path, epochs: int = 3) -> dict[str, float]:
    """Corpus, cleaning, packing, guarded packed training with a data spike, feedback; returns
    precision, recall, spike and guard (1.0 when the spike was named `data` with the right
    samples, after the run and live) and the padding fraction."""
    work.mkdir(parents=True, exist_ok=True)
    for stale in ("logs1", "packed2"):
        shutil.rmtree(work / stale, ignore_errors=True)
    print("1. building the corpus and cleaning it", flush=True)
    injected = corpus.build(work)
    print(f"   {len(injected)} injected: {dict(Counter(injected.values()))}")
    run.dataclean(
        "run",
        str(work / "input" / "corpus.jsonl"),
        "-o",
        str(work / "clean1"),
        "--max-chars",
        str(MAX_CHARS),
        "--executor",
        "local",
        "--overwrite",
        "--quiet",
    )
    injected = chunks_inherit(work / "clean1", injected)
    print("2. packing", flush=True)
    packed = pack(work / "clean1", work / "packed")
    # the corrupt records, cut to 150 bytes: three to a packed row
    records = [(i, text[:150]) for i, text in corpus.spike_records(SPIKE_RECORDS)]
    spike_run = work / "spike"
    (spike_run / "data").mkdir(parents=True, exist_ok=True)
    pq.write_table(
        pa.table({"id": [i for i, _ in records], "text": [t for _, t in records]}),
        spike_run / "data" / "part-00000.parquet",
    )
    spike = pack(spike_run, work / "spike_packed", "--no-shuffle")
    print(
        f"   {packed['samples']} samples in {packed['sequences']} rows "
        f"(padding {packed['padding_fraction']:.2%});"
        f" the spike: {spike['samples']} corrupt records in {spike['sequences']} rows"
    )
    print("3. training on packed rows", flush=True)
    per_epoch = int(packed["sequences"]) // BATCH_ROWS  # type: ignore[call-overload]
    spike_step = per_epoch * (epochs - 1) + per_epoch // 2
    train_packed(work / "packed", work / "logs1", epochs, inject={spike_step: work / "spike_packed"})
    print("4. feedback", flush=True)
    logs = work / "logs1"
    run.dataclean(
        "feedback",
        "--losses",
        str(logs / "losses"),
        "--steps",
        str(logs / "steps"),
        "--corpus",
        str(work / "clean1"),
        "-o",
        str(work / "feedback"),
    )
    injected.update({sample_id: "corrupt_record" for sample_id, _ in records})
    (work / "injected.json").write_text(json.dumps(injected, indent=1))
    figures = run.score(work, injected)
    ids = [i for i, _ in records]
    figures["spike"] = float(run.check_spike(work, spike_step, ids, injected))
    figures["guard"] = float(run.check_guard(logs, spike_step, ids, injected))
    figures["padding"] = float(packed["padding_fraction"])  # type: ignore[arg-type]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=HERE.parents[1] / "out" / "feedback_loop_packed")
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    started = time.monotonic()
    figures = first_pass(args.work, args.epochs)
    print("5. repacking without the quarantined samples", flush=True)
    repacked = pack(
        args.work / "clean1",
        args.work / "packed2",
        "--quarantine",
        str(args.work / "feedback" / "quarantine.parquet"),
    )
    print(
        f"   {repacked['quarantined']} samples left out, {repacked['samples']} packed "
        f"in {repacked['sequences']} rows (padding {repacked['padding_fraction']:.2%})"
    )
    print(f"   {time.monotonic() - started:.0f} s in all")
    sys.exit(0 if run.target_met(figures) else 1)


if __name__ == "__main__":
    main()
