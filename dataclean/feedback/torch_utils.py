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
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F


def per_sample_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    ignore_index: int = -100,
    shift: bool = False,
    return_tokens: bool = False,
) -> Any:
    """Each sample's mean token cross-entropy from a batch: a float tensor of shape [batch].

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
    tokens = scored.sum(dim=1)
    losses = (token_loss * scored).sum(dim=1) / tokens.clamp(min=1)
    if return_tokens:
        return losses, tokens.to(torch.int64)
    return losses


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
