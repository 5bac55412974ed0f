"""Training feedback: per-sample losses and loss spikes in, a quarantine list out.

The training side, in one import (torch is imported only when a name that needs it is used):

    from dataclean.feedback import (
        TrainingGuard, TrainingState, Playbook, per_sample_loss,
        DatasetQuarantine, QuarantinedDataset, LossLogWriter, StepLogWriter,
    )

- logs: `LossLogWriter`, `StepLogWriter`;
- the guard: `TrainingGuard` (its `Verdict`, `Incident`), `SpikeMonitor` and `SpikeEvent` (the
  detector), `DiagnosisRules` (the diagnosis' thresholds), `Playbook` (watch, roll back, lr
  factor and ramp), `TrainingState` (model, optimizer, scheduler, sampler, RNG in one checkpoint;
  torch);
- the data: `DatasetQuarantine` (which rows the list leaves out, refreshed as it changes),
  `QuarantinedDataset` and `QuarantineSampler`; for packed sequences `PackedQuarantine` and
  `flat_sample_ids`, and (torch) `PackedDataset`, `collate_packed`, `packed_attention_mask`;
- torch helpers: `per_sample_loss`, `max_over_ranks` (ranks skip a step together);
- Hugging Face: `GuardedTrainer`, `GuardCallback` (transformers).

The offline side is the `dataclean feedback` command (`dataclean.feedback.analysis`), which the
training side never imports; both diagnose spikes with `dataclean.feedback.detectors`.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from dataclean.feedback.detectors import DiagnosisRules
from dataclean.feedback.guard import Incident, TrainingGuard, Verdict
from dataclean.feedback.logwriter import LossLogWriter, StepLogWriter
from dataclean.feedback.monitor import SpikeEvent, SpikeMonitor
from dataclean.feedback.packed import PackedQuarantine, flat_sample_ids
from dataclean.feedback.playbook import Playbook
from dataclean.feedback.sampler import DatasetQuarantine, QuarantinedDataset, QuarantineSampler

if TYPE_CHECKING:
    from dataclean.feedback.guard_hf import GuardCallback, GuardedTrainer
    from dataclean.feedback.torch_utils import (
        PackedDataset,
        collate_packed,
        max_over_ranks,
        packed_attention_mask,
        per_sample_loss,
    )
    from dataclean.feedback.training_state import TrainingState

# Names whose modules import torch (or transformers): imported on first use.
_LAZY = {
    "TrainingState": "dataclean.feedback.training_state",
    "per_sample_loss": "dataclean.feedback.torch_utils",
    "PackedDataset": "dataclean.feedback.torch_utils",
    "collate_packed": "dataclean.feedback.torch_utils",
    "packed_attention_mask": "dataclean.feedback.torch_utils",
    "max_over_ranks": "dataclean.feedback.torch_utils",
    "GuardedTrainer": "dataclean.feedback.guard_hf",
    "GuardCallback": "dataclean.feedback.guard_hf",
}

__all__ = [
    "DatasetQuarantine",
    "DiagnosisRules",
    "GuardCallback",
    "GuardedTrainer",
    "Incident",
    "LossLogWriter",
    "PackedDataset",
    "PackedQuarantine",
    "Playbook",
    "QuarantineSampler",
    "QuarantinedDataset",
    "SpikeEvent",
    "SpikeMonitor",
    "StepLogWriter",
    "TrainingGuard",
    "TrainingState",
    "Verdict",
    "collate_packed",
    "flat_sample_ids",
    "max_over_ranks",
    "packed_attention_mask",
    "per_sample_loss",
]


def __getattr__(name: str) -> Any:
    """Import a torch-side name on first use (PEP 562), so `import dataclean.feedback` stays light."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dataclean.feedback' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
