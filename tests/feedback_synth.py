"""Synthetic training logs with known planted outliers and spikes, for the feedback tests.

A run: `samples` samples shuffled into batches of `batch` per epoch; loss falls as
2 + 3 exp(-step / 30), each sample has a small fixed difficulty and each occurrence some noise.
The lr warms up to its peak at step 30 and decays (cosine); the grad norm hovers around 1; the
loss scale is steady. `plant_*` methods change the run around a step the way each kind of
spike looks in real logs.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


class SyntheticRun:
    def __init__(
        self,
        samples: int = 1600,
        batch: int = 16,
        epochs: int = 3,
        ranks: int = 4,
        seed: int = 0,
    ) -> None:
        rng = np.random.default_rng(seed)
        self.rng = rng
        self.batch = batch
        self.ids = np.array([f"doc-{i:05d}" for i in range(samples)], dtype=object)
        difficulty = rng.normal(0, 0.06, samples)
        order = np.concatenate([rng.permutation(samples) for _ in range(epochs)])
        rows = len(order)
        self.sample_index = order
        self.step = np.arange(rows) // batch
        self.epoch = np.arange(rows) // samples
        self.rank = (np.arange(rows) % batch) * ranks // batch
        level = 2 + 3 * np.exp(-self.step / 30)
        self.loss = level * (1 + difficulty[order]) + rng.normal(0, 0.08, rows) * level
        steps = int(self.step.max()) + 1
        self.steps = np.arange(steps)
        warm = np.minimum(self.steps / 30, 1.0)
        decay = 0.1 + 0.9 * (1 + np.cos(np.pi * np.clip(self.steps - 30, 0, None) / steps)) / 2
        self.lr = 3e-4 * np.where(self.steps < 30, warm, decay)
        self.grad_norm = 1.0 + rng.normal(0, 0.05, steps)
        self.loss_scale = np.full(steps, 65536.0)

    def rows_at(self, step: int) -> np.ndarray:
        return np.flatnonzero(self.step == step)

    def plant_outliers(self, count: int, factor: float = 1.8) -> list[str]:
        """Samples whose loss is `factor` times the normal in every occurrence."""
        chosen = self.rng.choice(len(self.ids), count, replace=False)
        hit = np.isin(self.sample_index, chosen)
        self.loss[hit] *= factor
        return sorted(self.ids[chosen].tolist())

    def plant_unlucky(self, factor: float = 3.0) -> str:
        """A sample with one bad occurrence among several normal ones (must not be flagged)."""
        row = int(np.flatnonzero(self.epoch == 1)[5])
        self.loss[row] *= factor
        return str(self.ids[self.sample_index[row]])

    def plant_data_spike(self, step: int, count: int = 2, loss: float = 60.0) -> list[str]:
        rows = self.rows_at(step)[:count]
        self.loss[rows] = loss
        return sorted(self.ids[self.sample_index[rows]].tolist())

    def plant_grad_explosion(self, step: int) -> None:
        self.grad_norm[step - 10 : step] = np.geomspace(1.2, 9.0, 10)
        self.loss[self.rows_at(step)] *= 4.5

    def plant_fp16_overflow(self, step: int) -> None:
        self.loss_scale[step:] = 32768.0
        self.loss[self.rows_at(step)] = np.inf

    def plant_lr_overshoot(self, step: int) -> None:
        self.loss[self.rows_at(step)] *= 4.5

    def plant_single_rank(self, step: int, rank: int = 2) -> list[str]:
        rows = self.rows_at(step)
        rows = rows[self.rank[rows] == rank]
        self.loss[rows] *= 16.0
        return sorted(self.ids[self.sample_index[rows]].tolist())

    def losses(self) -> pa.Table:
        return pa.table(
            {
                "sample_id": pa.array(self.ids[self.sample_index].tolist(), pa.string()),
                "loss": pa.array(self.loss, pa.float64()),
                "step": pa.array(self.step, pa.int64()),
                "epoch": pa.array(self.epoch, pa.int64()),
                "rank": pa.array(self.rank, pa.int64()),
            }
        )

    def step_log(self, columns: tuple[str, ...] = ("lr", "grad_norm", "loss_scale")) -> pa.Table:
        loss = np.array([self.loss[self.step == s].mean() for s in self.steps])
        table = {"step": pa.array(self.steps, pa.int64()), "loss": pa.array(loss)}
        for name in columns:
            table[name] = pa.array(getattr(self, name), pa.float64())
        return pa.table(table)
