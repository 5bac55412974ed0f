"""What a rollback restores in process: model, optimizer, scheduler, sampler, loss scaler and RNG.

`TrainingState` bundles the training loop's objects so the guard can write a checkpoint of them
(`TrainingGuard.save_checkpoint`, one `torch.save` file, written atomically) and restore the last
one before a spike (`TrainingGuard(action="rollback" | "watch", state=...)`). The RNG states
(Python's `random`, numpy's global generator, torch's CPU and CUDA generators) go with it, so a
replayed step draws the same dropout masks and random choices as a run that never spiked. The
file loads with `torch.load(weights_only=True)`: numpy arrays in a state (the sampler's draw
counts, numpy's RNG key) are stored as tensors or lists.

Imports torch (like `torch_utils`); `dataclean.feedback.guard` never does.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch


def _portable(value: Any) -> Any:
    """The state with numpy arrays and scalars as tensors/floats, for `weights_only` loading."""
    if isinstance(value, dict):
        return {k: _portable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_portable(v) for v in value)
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value.copy())
    if isinstance(value, np.generic):
        return value.item()
    return value


def rng_state() -> dict[str, Any]:
    """Every global random generator's state."""
    legacy: tuple[Any, ...] = tuple(np.random.get_state(legacy=True))
    name, key, position, has_gauss, gauss = legacy
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": [name, np.asarray(key).tolist(), int(position), int(has_gauss), float(gauss)],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what `rng_state` returned."""
    python = state["python"]
    random.setstate((python[0], tuple(python[1]), python[2]))
    name, key, position, has_gauss, gauss = state["numpy"]
    np.random.set_state((name, np.asarray(key, dtype=np.uint32), position, has_gauss, gauss))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class TrainingState:
    """The objects of a training loop that a checkpoint holds. `scheduler`, `sampler` (anything
    with `state_dict`/`load_state_dict`, e.g. `QuarantineSampler`) and `scaler` (a GradScaler)
    are optional."""

    def __init__(
        self,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: Any = None,
        sampler: Any = None,
        scaler: Any = None,
    ) -> None:
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.sampler = sampler
        self.scaler = scaler

    def _parts(self) -> dict[str, Any]:
        parts = {"model": self.model, "optimizer": self.optimizer, "scheduler": self.scheduler}
        parts |= {"sampler": self.sampler, "scaler": self.scaler}
        return {name: part for name, part in parts.items() if part is not None}

    def state_dict(self) -> dict[str, Any]:
        """Every part's state and the RNG states."""
        state = {name: part.state_dict() for name, part in self._parts().items()}
        state["rng"] = rng_state()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore every part (a part the state lacks is an error: a rollback must be whole)."""
        for name, part in self._parts().items():
            if name not in state:
                raise KeyError(f"the checkpoint holds no {name!r} state")
            part.load_state_dict(state[name])
        set_rng_state(state["rng"])

    def save(self, path: str | os.PathLike[str], step: int) -> Path:
        """Write the state (with the step training resumes at) atomically; returns the path."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = target.with_name(f".{target.name}.tmp")
        torch.save({"step": int(step), **_portable(self.state_dict())}, temp)
        os.replace(temp, target)
        return target

    def load(self, path: str | os.PathLike[str]) -> int:
        """Restore a file `save` wrote; returns the step training resumes at."""
        state = torch.load(path, map_location="cpu", weights_only=True)
        if self.sampler is not None and "sampler" in state:
            state["sampler"] = {
                k: v.numpy() if isinstance(v, torch.Tensor) else v for k, v in state["sampler"].items()
            }
        self.load_state_dict(state)
        return int(state["step"])
