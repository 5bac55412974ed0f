"""The feedback loop inside Megatron-LM: spikes from its log, documents from its data order.

- `step_spikes(steps)`: the spikes of a step log (a Megatron log read by
  `dataclean.feedback.megatron_log`) and their diagnosis by the practitioners' rules of
  `dataclean.feedback.detectors`, from the step log alone.
- `TokenLossRecorder`: the hook for Megatron's `loss_func` (docs/megatron.md has the ten lines):
  each micro-batch's per-token losses and loss mask, saved with the global sample indices the
  pretraining sampler gave that micro-batch (`consumed_train_samples` + step x micro x dp + rank x
  micro, as `dataclean.export.megatron.locate` computes them).
- `document_losses(folder, locator)`: those per-token losses split by document with the locate
  mapping, as a per-sample loss log (`sample_id`, `loss`, `step`, `tokens`) that `dataclean
  feedback --losses` reads: the loss at position p predicts token p + 1 of the sample, so it counts
  for the document that token belongs to; a document cut across samples gathers all its pieces.
- `suspects(...)`: a `data` spike's iteration mapped to its documents, as quarantine entries for
  review, ranked by their per-document loss when there is one, else by the corpus's perplexity
  and quality signals (`dataclean.feedback.suspicion`). `dataclean feedback --megatron` and
  `dataclean megatron suspects` both list them with it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from dataclean import columns as C
from dataclean.errors import ConfigError
from dataclean.export.megatron.locate import Locator
from dataclean.feedback.detectors import DiagnosisRules, Spike, diagnose
from dataclean.feedback.monitor import SpikeMonitor, detect_spikes
from dataclean.feedback.suspicion import corpus_suspicion
from dataclean.quarantine.lists import make_list

SUSPECT_REASON = "megatron_data_spike"


def step_spikes(
    steps: pa.Table, monitor: SpikeMonitor | None = None, rules: DiagnosisRules | None = None
) -> list[Spike]:
    """Spikes of a step log and their diagnosis (no per-sample losses: the step log's evidence)."""
    steps = steps.sort_by(C.STEP)
    losses = np.array(steps.column(C.LOSS).to_numpy(zero_copy_only=False), dtype=np.float64)
    numbers = steps.column(C.STEP).to_numpy()
    finite = np.isfinite(losses)
    monitor = monitor or SpikeMonitor(window=100, k=4.0, min_ratio=1.5, warmup=20)
    events = detect_spikes(numbers[finite], losses[finite], monitor)
    return [diagnose(event, steps, None, rules) for event in events]


class TokenLossRecorder:
    """Saves each micro-batch's per-token losses with its global sample indices (call `record`
    from Megatron's `loss_func`; one `.npz` file per micro-batch and data-parallel rank)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._consumed: int | None = None
        self._step = 0

    def record(
        self,
        losses: Any,
        loss_mask: Any,
        consumed_samples: int,
        dp_rank: int,
        dp_size: int,
        micro_batch_size: int,
        iteration: int | None = None,
    ) -> Path:
        """`losses`, `loss_mask`: (micro-batch, seq_length) tensors or arrays; `consumed_samples`:
        Megatron's `args.consumed_train_samples` during the iteration (its value before it)."""
        if consumed_samples != self._consumed:
            self._consumed, self._step = consumed_samples, 0
        first = consumed_samples + self._step * micro_batch_size * dp_size + dp_rank * micro_batch_size
        values = _numpy(losses).astype(np.float32).reshape(micro_batch_size, -1)
        mask = _numpy(loss_mask).reshape(values.shape) > 0
        path = self.folder / f"losses-{first:012d}-r{dp_rank:05d}.npz"
        np.savez(
            path,
            global_samples=np.arange(first, first + micro_batch_size, dtype=np.int64),
            losses=np.where(mask, values, np.nan).astype(np.float32),
            iteration=np.int64(-1 if iteration is None else iteration),
        )
        self._step += 1
        return path


def _numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):
        value = value.detach().float().cpu().numpy()
    return np.asarray(value)


def document_losses(folder: str | Path, locator: Locator, global_batch_size: int | None = None) -> pa.Table:
    """Per-document mean token loss from a `TokenLossRecorder` folder, as a per-sample loss log.

    `step`: the iteration of the samples (from the recorder, else from `global_batch_size`, else
    from the locator's batching); a document seen in several iterations gets a row per iteration.
    """
    size = global_batch_size or locator.batching.global_batch_size
    sums: dict[tuple[str, int], float] = defaultdict(float)
    counts: dict[tuple[str, int], int] = defaultdict(int)
    for path in sorted(Path(folder).glob("losses-*.npz")):
        with np.load(path) as saved:
            samples, losses, recorded = saved["global_samples"], saved["losses"], int(saved["iteration"])
        for sample, row in zip(samples.tolist(), losses, strict=True):
            iteration = recorded if recorded >= 0 else sample // size + 1
            located = locator.samples(iteration, sample, range(1))[0]
            # the loss at position p predicts token p + 1: its document is the span holding p + 1
            starts = np.array([span.sample_offset for span in located.spans])
            positions = np.arange(len(row)) + 1
            owner = np.searchsorted(starts, positions, side="right") - 1
            for index, span in enumerate(located.spans):
                values = row[(owner == index) & np.isfinite(row)]
                if len(values):
                    key = (str(span.id if span.id is not None else f"document:{span.document}"), iteration)
                    sums[key] += float(values.sum(dtype=np.float64))
                    counts[key] += len(values)
    keys = sorted(sums)
    return pa.table(
        {
            C.SAMPLE_ID: pa.array([k[0] for k in keys], pa.string()),
            C.LOSS: pa.array([sums[k] / counts[k] for k in keys], pa.float64()),
            C.STEP: pa.array([k[1] for k in keys], pa.int64()),
            C.TOKENS: pa.array([counts[k] for k in keys], pa.int64()),
        }
    )


def suspects(
    spikes: list[Spike],
    locator: Locator,
    losses: pa.Table | None = None,
    corpus: str | Path | None = None,
    logged: Mapping[int, tuple[int | None, int | None]] | None = None,
) -> pa.Table:
    """The documents of every `data` spike's iteration as quarantine entries for review.

    Ranked (the list's order) by their mean loss at that iteration when `losses` (a per-sample
    loss log, as `document_losses` makes) has it, highest first; then the others by their
    suspicion in the `corpus` (a dataclean output: `dataclean.feedback.suspicion`, 0-1), highest
    first; then the unscored. `score` is the loss, else the suspicion. `logged`: iteration ->
    (consumed samples, global batch size) from Megatron's log (`megatron_log.logged_batches`):
    an iteration's samples start at its consumed count minus the batch, which holds for resumed
    runs too; a logged batch size other than the locator's is refused.
    """
    by_key: dict[tuple[str, int], float] = {}
    if losses is not None:
        for row in losses.select([C.SAMPLE_ID, C.STEP, C.LOSS]).to_pylist():
            if row[C.LOSS] is not None and math.isfinite(row[C.LOSS]):
                by_key[(str(row[C.SAMPLE_ID]), int(row[C.STEP] or -1))] = float(row[C.LOSS])
    found: list[tuple[str, int]] = []
    for spike in spikes:
        if spike.diagnosis != "data":
            continue
        seen: set[str] = set()
        consumed, batch = (logged or {}).get(spike.step, (None, None))
        if batch is not None and batch != locator.batching.global_batch_size:
            raise ConfigError(
                f"Megatron's log has global batch size {batch} at iteration {spike.step}, the data "
                f"options {locator.batching.global_batch_size}: give the run's --global-batch-size"
            )
        for sample in locator.iteration(spike.step, consumed):
            for span in sample.spans:
                if span.id is not None and span.id not in seen:
                    seen.add(span.id)
                    found.append((span.id, spike.step))
    unscored = {i for i, step in found if (i, step) not in by_key}
    suspicion = corpus_suspicion(corpus, unscored) if corpus is not None and unscored else {}
    ranked = []
    for sample_id, step in found:
        loss, other = by_key.get((sample_id, step)), suspicion.get(sample_id)
        rank = (0, -loss) if loss is not None else (1, -other) if other is not None else (2, 0.0)
        entry = {
            C.SAMPLE_ID: sample_id,
            C.REASON: f"{SUSPECT_REASON}:iteration_{step}",
            C.SCORE: loss if loss is not None else other,
            C.FIRST_STEP: step,
            C.LAST_STEP: step,
            C.OCCURRENCES: 1,
            C.ACTION: "review",
            C.SOURCE: "megatron",
        }
        ranked.append((rank, entry))
    ranked.sort(key=lambda item: item[0])
    return make_list(entry for _, entry in ranked)
