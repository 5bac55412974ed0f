"""The training guard in a Hugging Face `Trainer`: a `TrainerCallback` and a `Trainer` that feeds it.

    guard = TrainingGuard("guard", action={"data": "skip"})
    data = QuarantinedDataset(dataset, DatasetQuarantine.from_dataset(dataset, guard.quarantine_path))
    trainer = GuardedTrainer(model=model, args=args, train_dataset=data, data_collator=collate,
                             guard=guard)  # args: remove_unused_columns=False keeps `sample_id`
    trainer.train()

`GuardedTrainer.compute_loss` takes each sample's loss (`per_sample_loss` on the causal-LM
logits), weights it by the item's `weight` (a down-weighted sample counts less) and hands the
losses and `sample_id`s to the `GuardCallback`. The callback checks the step in
`on_pre_optimizer_step`, after gradient clipping and before `optimizer.step()`, with the pre-clip
grad norm the Trainer computed, the scheduler's lr and the loss scale of the fp16 grad scaler.
`skip` drops the step's update (its gradients set to None, the scheduler's advance undone);
`stop` also ends training without saving, and the message names the last checkpoint saved
before the spike (`on_save`). `watch` and `rollback` stop the same way when a rollback is due
(the Trainer's state is not the guard's to restore): run it under `dataclean supervise`, which
relaunches it with `--resume_from_checkpoint`; the relaunched guard then holds the lr factor
supervise passes (DATACLEAN_LR_FACTOR) and ramps it back, through the optimizer's step hooks. The train
sampler is a `QuarantineSampler` when the dataset is a `QuarantinedDataset`, so a resumed run
(`trainer.train(resume_from_checkpoint=...)`) with the list in place never draws a listed sample.
Packed training: a `PackedDataset` with `collate_packed` (or any collator giving `position_ids`
that restart at 0 per sample, such as `DataCollatorWithFlattening`, with `sample_id` flattened
in order): the losses are then per sample segment, and the model gets the `position_ids` (set
`use_cache=False` so transformers builds the block-diagonal mask from them).
Needs `transformers` (and `accelerate`): `pip install dataclean[hf]`.
"""

from __future__ import annotations

import os
from typing import Any

import torch
from transformers import Trainer, TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from dataclean.feedback.guard import TrainingGuard, Verdict
from dataclean.feedback.packed import flat_sample_ids
from dataclean.feedback.sampler import WEIGHT_KEY, QuarantinedDataset, QuarantineSampler
from dataclean.feedback.torch_utils import per_sample_loss


class GuardCallback(TrainerCallback):  # type: ignore[misc, unused-ignore]
    """Runs a `TrainingGuard` once per optimizer step of a `Trainer` (see the module docstring).

    The step's per-sample losses come through `record` (called by `GuardedTrainer.compute_loss`
    for each micro-batch); the step loss is their token-weighted mean.
    """

    def __init__(self, guard: TrainingGuard) -> None:
        self.guard = guard
        self.grad_norm: float | None = None
        self.last: Verdict | None = None
        self._ids: list[str] = []
        self._losses: list[torch.Tensor] = []
        self._tokens: list[torch.Tensor] = []

    def record(self, sample_ids: list[str], losses: torch.Tensor, tokens: torch.Tensor) -> None:
        """Add one micro-batch's samples to the current step."""
        self._ids += [str(i) for i in sample_ids]
        self._losses.append(losses.detach().float())
        self._tokens.append(tokens.detach())

    def on_pre_optimizer_step(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        optimizer = kwargs.get("optimizer")
        scheduler = kwargs.get("lr_scheduler")
        lr = scheduler.get_last_lr()[0] if scheduler is not None else None
        if self._losses:
            losses = torch.cat(self._losses)
            tokens = torch.cat(self._tokens).to(losses.dtype)
            loss: Any = (losses * tokens).sum() / tokens.sum().clamp(min=1)
        else:  # compute_loss was not GuardedTrainer's: nothing to judge this step by
            return
        grad_norm = self.grad_norm
        if grad_norm is None and kwargs.get("model") is not None:
            grads = [p.grad for p in kwargs["model"].parameters() if p.grad is not None]
            grad_norm = (
                float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))) if grads else None
            )
        self.last = self.guard.check(
            state.global_step,
            loss,
            self._ids,
            losses,
            grad_norm=grad_norm,
            lr=lr,
            scaler=getattr(optimizer, "scaler", None),
            optimizer=optimizer,
            tokens=torch.cat(self._tokens),
            epoch=int(state.epoch or 0),
            scheduler=scheduler,
        )
        self._ids, self._losses, self._tokens, self.grad_norm = [], [], [], None

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> TrainerControl:
        if self.last is not None and self.last.stop:
            control.should_training_stop = True
            control.should_save = False  # the weights are those before the spike: nothing new
        self.last = None
        return control

    def on_save(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        path = os.path.join(str(args.output_dir), f"checkpoint-{state.global_step}")
        self.guard.note_checkpoint(path, state.global_step)

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.guard.close()


class GuardedTrainer(Trainer):  # type: ignore[misc, unused-ignore]
    """A causal-LM `Trainer` guarded by `guard`: per-sample losses, weights and the sampler.

    Items carry `sample_id` (and `weight` from a `QuarantinedDataset`); the collator passes both
    through (ids as a list) and `remove_unused_columns=False` keeps them. `sampler_options` go to
    the `QuarantineSampler` (default: shuffled with `args.seed`). `shift`: the labels are the
    inputs (causal LM: position t predicts token t+1); False when the collator shifted them.
    """

    def __init__(
        self,
        *args: Any,
        guard: TrainingGuard,
        sampler_options: dict[str, Any] | None = None,
        shift: bool = True,
        **kwargs: Any,
    ) -> None:
        self.shift = shift
        self.guard_callback = GuardCallback(guard)
        kwargs["callbacks"] = [*(kwargs.get("callbacks") or []), self.guard_callback]
        super().__init__(*args, **kwargs)
        self.sampler_options = sampler_options or {}
        clip = self.accelerator.clip_grad_norm_

        def clip_and_keep(*clip_args: Any, **clip_kwargs: Any) -> Any:
            # The Trainer's pre-clip grad norm (it clips, or measures with max_norm=inf, here).
            norm = clip(*clip_args, **clip_kwargs)
            self.guard_callback.grad_norm = None if norm is None else float(norm)
            return norm

        self.accelerator.clip_grad_norm_ = clip_and_keep

    def _get_train_sampler(self, *args: Any, **kwargs: Any) -> Any:
        dataset = self.train_dataset
        if isinstance(dataset, QuarantinedDataset):
            options = {"seed": self.args.seed, **self.sampler_options}
            sampler: QuarantineSampler = dataset.sampler(**options)
            return sampler
        return super()._get_train_sampler(*args, **kwargs)

    def compute_loss(
        self,
        model: Any,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: Any = None,
    ) -> Any:
        sample_ids = flat_sample_ids(inputs.pop("sample_id"))
        weights = inputs.pop(WEIGHT_KEY, None)
        labels = inputs.pop("labels")
        inputs.pop("sample_index", None)  # a PackedDataset's; the model takes no such input
        outputs = model(**inputs)
        # Packed rows (PackedDataset, DataCollatorWithFlattening): a loss per sample segment.
        position_ids = inputs.get("position_ids")
        packed = position_ids is not None and len(sample_ids) != labels.shape[0]
        losses, tokens = per_sample_loss(
            outputs.logits,
            labels,
            shift=self.shift,
            return_tokens=True,
            position_ids=position_ids if packed else None,
        )
        mass = tokens.to(losses.dtype)
        if weights is not None:
            mass = mass * torch.as_tensor(weights, dtype=losses.dtype, device=losses.device)
        # The token-mean loss; with gradient accumulation the Trainer gives the whole step's tokens.
        denominator = num_items_in_batch if num_items_in_batch is not None else mass.sum()
        loss = (losses * mass).sum() / torch.as_tensor(denominator, device=losses.device).clamp(min=1)
        if model.training:
            self.guard_callback.record(sample_ids, losses, tokens)
        return (loss, outputs) if return_outputs else loss
