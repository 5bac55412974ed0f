"""Training feedback: per-sample losses and loss spikes in, a quarantine list out.

Training side (cheap, no torch import here): `LossLogWriter`, `StepLogWriter`, `SpikeMonitor`;
for PyTorch, `dataclean.feedback.torch_utils.per_sample_loss`. Analysis side: `analyze` and the
`dataclean feedback` command (`dataclean.feedback.analysis.cli`).
"""

from dataclean.feedback.logwriter import LossLogWriter, StepLogWriter
from dataclean.feedback.monitor import SpikeEvent, SpikeMonitor

__all__ = ["LossLogWriter", "SpikeEvent", "SpikeMonitor", "StepLogWriter"]
