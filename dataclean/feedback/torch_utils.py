"""PyTorch helpers for logging per-sample losses. The only module of dataclean that imports torch.

Plain training loop:

    from dataclean.feedback import LossLogWriter
    from dataclean.feedback.torch_utils import per_sample_loss

    writer = LossLogWriter("logs/losses", rank=rank)
    for step, batch in enumerate(loader):
        logits = model(batch["input_ids"])
        losses, tokens = per_sample_loss(logits, batch["labels"], return_tokens=True)
        loss = losses.sum() / tokens.sum().clamp(min=1)   # the usual token-mean loss
        loss.backward(); optimizer.step(); optimizer.zero_grad()
        writer.log(step, batch["sample_id"], losses, epoch=epoch, tokens=tokens)
    writer.close()

Hugging Face `Trainer`: see `examples/feedback_loop/hf_trainer.py` (a `compute_loss` override
that keeps the `sample_id` column out of the model's inputs and logs the same way).

Packed sequences (`dataclean pack`, docs/pack.md): `PackedDataset(PACKED)` yields rows whose
`position_ids` restart at 0 at every sample, `collate_packed` batches them with the batch's
sample ids flattened in order, and `per_sample_loss(..., position_ids=batch["position_ids"])`
gives one loss per sample segment in that order, so logging and the guard are the same calls:

    losses, tokens = per_sample_loss(logits, batch["labels"], shift=True, return_tokens=True,
                                     position_ids=batch["position_ids"])
    writer.log(step, batch["sample_id"], losses, tokens=tokens)
"""

from __future__ import annotations

import os
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset


def per_sample_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    ignore_index: int = -100,
    shift: bool = False,
    return_tokens: bool = False,
    position_ids: torch.Tensor | None = None,
) -> Any:
    """Each sample's mean token cross-entropy from a batch: a float tensor of shape [batch].

    With `position_ids` ([batch, seq], restarting at 0 where a sample starts: packed sequences,
    Hugging Face's `DataCollatorWithFlattening`, flash-attention varlen batches) the result has one
    loss per sample segment instead, the segments of row 0 first, in order (`segment_index`). A
    token's loss belongs to the segment of the token it predicts; a segment's first label is
    `ignore_index` in both conventions, so no loss crosses from one sample into the next.

    `logits`: [batch, seq, vocab]; `labels`: [batch, seq], `ignore_index` marks padding and
    prompt tokens. `shift=True` predicts token t+1 from position t (pass the model's unshifted
    labels, as Hugging Face causal LMs take them). A sample with no scored token gets loss 0 and
    0 tokens (`dataclean feedback` ignores rows with tokens == 0). Gradients flow through the
    result, so `per_sample_loss(...).mean()` can be the training loss itself.
    With `return_tokens=True` returns (losses, tokens scored per sample).
    """
    if shift:
        logits = logits[:, :-1, :]
        labels = labels[:, 1:]
    batch, length, vocab = logits.shape
    token_loss = F.cross_entropy(
        logits.reshape(-1, vocab).float(),
        labels.reshape(-1),
        ignore_index=ignore_index,
        reduction="none",
    ).view(batch, length)
    scored = (labels != ignore_index).to(token_loss.dtype)
    if position_ids is None:
        tokens = scored.sum(dim=1)
        losses = (token_loss * scored).sum(dim=1) / tokens.clamp(min=1)
    else:
        segments, count = segment_index(position_ids)
        if shift:
            segments = segments[:, 1:]
        flat = segments.reshape(-1)
        tokens = scored.new_zeros(count).index_add(0, flat, scored.reshape(-1))
        total = token_loss.new_zeros(count).index_add(0, flat, (token_loss * scored).reshape(-1))
        losses = total / tokens.clamp(min=1)
    if return_tokens:
        return losses, tokens.to(torch.int64)
    return losses


def segment_index(position_ids: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Each token's sample segment ([batch, seq], numbered over the batch in row order) and the
    segment count, from position ids that restart at 0 at every segment (and start every row)."""
    if position_ids.dim() == 1:
        position_ids = position_ids.unsqueeze(0)
    if bool((position_ids[:, 0] != 0).any()):
        raise ValueError("position_ids: every row must start a segment at position 0")
    starts = (position_ids == 0).reshape(-1).to(torch.int64)
    segments = (torch.cumsum(starts, 0) - 1).view(position_ids.shape)
    return segments, int(starts.sum())


def packed_attention_mask(position_ids: torch.Tensor) -> torch.Tensor:
    """The block-diagonal causal mask of packed rows ([batch, 1, seq, seq], True = may attend):
    a token sees the earlier tokens of its own sample only. For `scaled_dot_product_attention`'s
    `attn_mask` in models without flash-attention varlen kernels."""
    segments, _ = segment_index(position_ids)
    same = segments.unsqueeze(2) == segments.unsqueeze(1)
    length = segments.shape[1]
    causal = torch.ones(length, length, dtype=torch.bool, device=segments.device).tril()
    return (same & causal).unsqueeze(1)


def max_over_ranks(code: int) -> int:
    """The largest `code` over the ranks of the default process group (`code` itself when not
    distributed): `TrainingGuard(agree=max_over_ranks)` makes all ranks skip or stop together."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return code
    on_gpu = dist.get_backend() == "nccl"
    device = torch.device("cuda", torch.cuda.current_device()) if on_gpu else torch.device("cpu")
    flag = torch.tensor([code], dtype=torch.int64, device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return int(flag.item())


class PackedDataset(Dataset):  # type: ignore[type-arg]
    """A torch `Dataset` over a `dataclean pack` folder (PACKED/part-*.parquet), a row per item.

    An item: `input_ids` (long, [seq_len]); `labels`, the input ids with the first token of every
    sample and every padding position set to -100 (as `DataCollatorWithFlattening` does, with
    `shift=True` losses: position t predicts t+1, and no sample predicts the next one's first
    token); `position_ids`, restarting at 0 at every sample start (padding continues the last
    sample's positions, so it forms no segment of its own: the segments are exactly the
    samples); `sample_index`, each token's sample within the row (-1 for padding); `sample_id`,
    the row's sample ids; `weight`, each sample's weight (float32). `collate_packed` batches items.
    The files are memory-mapped; `sample_ids` holds every row's ids (for the quarantine views).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        import pyarrow as pa

        from dataclean.pack.write import SAMPLE_IDS, packed_files, read_packed

        self.path = str(path)
        if not packed_files(self.path):
            raise ValueError(f"{self.path}: no packed sequences (part-*.parquet from `dataclean pack`)")
        self.table: pa.Table = read_packed(self.path)
        self.sample_ids: list[list[str]] = self.table.column(SAMPLE_IDS).to_pylist()

    def __len__(self) -> int:
        return int(self.table.num_rows)

    def __getitem__(self, index: int) -> dict[str, Any]:
        from dataclean.pack.write import INPUT_IDS, SAMPLE_LENGTHS, SAMPLE_STARTS, SAMPLE_WEIGHTS

        row = self.table.slice(int(index), 1)
        input_ids = torch.from_numpy(row.column(INPUT_IDS).combine_chunks().values.to_numpy().astype("int64"))
        starts = row.column(SAMPLE_STARTS).to_pylist()[0]
        lengths = row.column(SAMPLE_LENGTHS).to_pylist()[0]
        end = starts[-1] + lengths[-1]
        sample_index = torch.full_like(input_ids, -1)
        position_ids = torch.empty_like(input_ids)
        labels = input_ids.clone()
        for k, (start, count) in enumerate(zip(starts, lengths, strict=True)):
            sample_index[start : start + count] = k
            stop = start + count if k + 1 < len(starts) else len(input_ids)
            position_ids[start:stop] = torch.arange(stop - start)
            labels[start] = -100
        labels[end:] = -100
        weights = row.column(SAMPLE_WEIGHTS).to_pylist()[0]
        return {
            "input_ids": input_ids,
            "labels": labels,
            "position_ids": position_ids,
            "sample_index": sample_index,
            "sample_id": self.sample_ids[int(index)],
            "weight": torch.tensor(weights, dtype=torch.float32),
        }


def collate_packed(items: list[dict[str, Any]]) -> dict[str, Any]:
    """A batch of `PackedDataset` items: tensors stacked ([batch, seq_len]); `sample_id` and
    `weight` flattened over the rows in order, matching `per_sample_loss(..., position_ids=...)`."""
    batch: dict[str, Any] = {
        key: torch.stack([item[key] for item in items])
        for key in ("input_ids", "labels", "position_ids", "sample_index")
    }
    batch["sample_id"] = [sample_id for item in items for sample_id in item["sample_id"]]
    batch["weight"] = torch.cat([torch.as_tensor(item["weight"], dtype=torch.float32) for item in items])
    return batch
