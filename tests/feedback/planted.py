"""Planted training runs: synthetic logs whose causes are known, to check the feedback detectors.

A `PlantedRun` draws a run the way a pre-training log looks: `steps` optimizer steps of `batch`
samples drawn epoch by epoch (a fresh shuffle each epoch) from `samples` ids, spread over `ranks`
data-parallel ranks; the typical loss falls from `start_loss` to `end_loss`, each sample has a
fixed difficulty and each occurrence its own noise; lr warms up linearly for `warmup` steps and
decays on a cosine to a tenth; the grad norm starts high in warm-up and settles near 1; the fp16
loss scale starts at 2**16 and doubles after every 2,000 steps without an overflow (PyTorch's
`GradScaler` defaults).

Each `plant_*` method changes the run the way that cause shows in real logs and records it in
`truth`. The truth is what the tests score against: it is this generator's input, never a
detector's output. `evaluate` scores an analysis against it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from dataclean import columns as C


@dataclass
class PlantedSpike:
    """A planted spike: the step, the diagnosis it should get, and the samples it should blame."""

    step: int
    diagnosis: str
    sample_ids: list[str] = field(default_factory=list)


@dataclass
class Truth:
    """What was planted: spikes, and the samples a good quarantine list holds (and only those)."""

    spikes: list[PlantedSpike] = field(default_factory=list)
    bad_samples: set[str] = field(default_factory=set)

    def spike_at(self, step: int) -> PlantedSpike | None:
        return next((s for s in self.spikes if s.step == step), None)


@dataclass
class Score:
    """How an analysis did against the truth."""

    found: list[tuple[int, str, str]]  # (step, planted diagnosis, diagnosis given)
    missed: list[int]
    false_spikes: list[tuple[int, str]]
    wrong_samples: list[int]  # planted spikes whose blamed samples differ from the planted ones
    precision: float
    recall: float
    false_samples: list[str]

    @property
    def misdiagnosed(self) -> list[tuple[int, str, str]]:
        return [f for f in self.found if f[1] != f[2]]


def evaluate(truth: Truth, spikes: list[tuple[int, str, list[str]]], quarantined: set[str]) -> Score:
    """Score (step, diagnosis, blamed sample ids) of each spike found and the quarantined ids."""
    found, false_spikes, wrong = [], [], []
    given = {step: (diagnosis, blamed) for step, diagnosis, blamed in spikes}
    for step, (diagnosis, blamed) in sorted(given.items()):
        planted = truth.spike_at(step)
        if planted is None:
            false_spikes.append((step, diagnosis))
            continue
        found.append((step, planted.diagnosis, diagnosis))
        if planted.sample_ids and sorted(blamed) != sorted(planted.sample_ids):
            wrong.append(step)
    missed = [s.step for s in truth.spikes if s.step not in given]
    hits = len(quarantined & truth.bad_samples)
    return Score(
        found=found,
        missed=missed,
        false_spikes=false_spikes,
        wrong_samples=wrong,
        precision=hits / len(quarantined) if quarantined else 1.0,
        recall=hits / len(truth.bad_samples) if truth.bad_samples else 1.0,
        false_samples=sorted(quarantined - truth.bad_samples),
    )


class PlantedRun:
    """A synthetic run to plant causes in; `losses()` and `step_log()` give its two logs."""

    def __init__(
        self,
        steps: int = 3000,
        batch: int = 16,
        samples: int = 20_000,
        ranks: int = 1,
        start_loss: float = 2.1,
        end_loss: float = 1.6,
        noise: float = 0.2,
        difficulty: float = 0.15,
        warmup: int = 100,
        peak_lr: float = 3e-4,
        seed: int = 0,
    ) -> None:
        rng = np.random.default_rng(seed)
        self.rng = rng
        self.batch = batch
        self.ranks = ranks
        self.warmup = warmup
        self.ids = np.array([f"s{i:06d}" for i in range(samples)], dtype=object)
        rows = steps * batch
        epochs = -(-rows // samples)
        self.sample_index = np.concatenate([rng.permutation(samples) for _ in range(epochs)])[:rows]
        self.step = np.arange(rows) // batch
        self.epoch = np.arange(rows) // samples
        self.rank = (np.arange(rows) % batch) * ranks // batch
        self.steps = np.arange(steps)
        trend = end_loss + (start_loss - end_loss) * np.exp(-3.0 * self.steps / steps)
        self.level = trend
        skill = rng.normal(0.0, difficulty, samples)
        self.loss = trend[self.step] + skill[self.sample_index] + rng.normal(0.0, noise, rows)
        self.loss = np.maximum(self.loss, 0.05)
        after = np.clip(self.steps - warmup, 0, None) / max(steps - warmup, 1)
        self.lr = peak_lr * np.where(
            self.steps < warmup,
            (self.steps + 1) / warmup,
            0.1 + 0.9 * (1 + np.cos(np.pi * after)) / 2,
        )
        early = 1.0 + 4.0 * np.exp(-self.steps / (warmup / 4))  # large gradients while warming up
        self.grad_norm = early * np.exp(rng.normal(0.0, 0.05, steps))
        self.overflow = np.zeros(steps, dtype=bool)
        self.truth = Truth()

    # --- where things sit ---------------------------------------------------------------------

    def rows_at(self, step: int) -> np.ndarray:
        """Row numbers of the samples trained at `step`."""
        return np.arange(step * self.batch, (step + 1) * self.batch)

    def ids_at(self, step: int) -> list[str]:
        return [str(i) for i in self.ids[self.sample_index[self.rows_at(step)]]]

    # --- causes ---------------------------------------------------------------------------------

    def plant_outliers(self, count: int, low: float = 4.0, high: float = 6.0) -> list[str]:
        """Samples `low`-`high` nats above the rest in every occurrence (noise, markup, another
        language): the quarantine list should hold them."""
        chosen = self.rng.choice(len(self.ids), count, replace=False)
        extra = self.rng.uniform(low, high, len(self.ids))
        hit = np.isin(self.sample_index, chosen)
        self.loss[hit] += extra[self.sample_index[hit]]
        ids = sorted(str(i) for i in self.ids[chosen])
        self.truth.bad_samples.update(ids)
        return ids

    def plant_unlucky(self, factor: float = 3.0) -> str:
        """One occurrence, `factor` times its loss, of a sample seen at least three times: one bad
        batch must not condemn it (nothing is recorded in the truth)."""
        seen = np.bincount(self.sample_index, minlength=len(self.ids))
        row = int(np.flatnonzero(seen[self.sample_index] >= 3)[len(self.sample_index) // 2 % 97])
        self.loss[row] *= factor
        return str(self.ids[self.sample_index[row]])

    def plant_nonfinite_samples(self, count: int) -> list[str]:
        """Samples whose loss is NaN every time (e.g. a sample that overflows on its own); the step
        loss of each of their batches is NaN too, a `data` spike blaming them."""
        chosen = self.rng.choice(len(self.ids), count, replace=False)
        hit = np.flatnonzero(np.isin(self.sample_index, chosen))
        self.loss[hit] = np.nan
        for step in np.unique(self.step[hit]):  # each makes its batch's mean loss NaN: a spike
            rows = hit[self.step[hit] == step]
            blamed = sorted(str(i) for i in self.ids[self.sample_index[rows]])
            self.truth.spikes.append(PlantedSpike(int(step), "data", blamed))
        ids = sorted(str(i) for i in self.ids[chosen])
        self.truth.bad_samples.update(ids)
        return ids

    def plant_data_spike(self, step: int, count: int = 2, loss: float = 40.0) -> list[str]:
        """`count` samples at about `loss` in an otherwise normal batch (garbage bytes, a corrupt
        record): a `data` spike that blames exactly them."""
        rows = self.rows_at(step)[:count]
        self.loss[rows] = loss * self.rng.uniform(0.95, 1.05, len(rows))
        ids = sorted(self.ids_at(step)[:count])
        self.truth.spikes.append(PlantedSpike(step, "data", ids))
        self.truth.bad_samples.update(ids)
        return ids

    def plant_fp16_overflow(self, step: int, halvings: int = 5, jump: float = 4.5, nan: bool = False) -> None:
        """Gradients overflow at `halvings` steps in a row from `step`: the dynamic loss scale halves
        after each (the optimizer step is skipped, the grad norm is inf), and the whole batch at
        `step` is `jump` nats up (or non-finite with `nan`)."""
        self.overflow[step : step + halvings] = True
        self.grad_norm[step : step + halvings] = np.inf
        rows = self.rows_at(step)
        self.loss[rows] = np.inf if nan else self.loss[rows] + jump
        self.truth.spikes.append(PlantedSpike(step, "fp16_overflow"))

    def plant_grad_explosion(
        self,
        step: int,
        climb: int = 200,
        start: float = 1.0,
        end: float = 4.0,
        peak: float = 23.6,
        jump: float = 6.5,
    ) -> None:
        """The grad norm creeps from `start` to `end` over `climb` steps, is `peak` at `step`, and
        the whole batch there is `jump` nats up; then training goes on from a rewind (normal)."""
        noise = np.exp(self.rng.normal(0.0, 0.05, climb))
        self.grad_norm[step - climb : step] = np.geomspace(start, end, climb) * noise
        self.grad_norm[step] = peak
        self.loss[self.rows_at(step)] += jump
        self.truth.spikes.append(PlantedSpike(step, "grad_explosion"))

    def plant_lr_overshoot(self, step: int, jump: float = 5.0, grad: float = 6.0) -> None:
        """Just after the lr reached its peak the whole batch rises by `jump` nats and the grad norm
        jumps `grad` times, with no climb before: the peak lr is too high for the model."""
        if not self.warmup <= step <= self.warmup + 50:
            raise ValueError(f"an lr overshoot belongs just after warm-up (step {self.warmup}-)")
        self.grad_norm[step] *= grad
        self.loss[self.rows_at(step)] += jump
        self.truth.spikes.append(PlantedSpike(step, "lr_overshoot"))

    def plant_single_rank(self, step: int, rank: int = 1, factor: float = 12.0) -> list[str]:
        """Every sample of one rank's micro-batch is `factor` times its loss (a bad node or a
        corrupt shard read): `single_rank`, naming that rank's samples, which are not to blame."""
        if self.ranks < 2:
            raise ValueError("a single-rank spike needs a run with ranks >= 2")
        rows = self.rows_at(step)
        rows = rows[self.rank[rows] == rank]
        self.loss[rows] *= factor
        ids = sorted(str(i) for i in self.ids[self.sample_index[rows]])
        self.truth.spikes.append(PlantedSpike(step, "single_rank", ids))
        return ids

    # --- the logs -------------------------------------------------------------------------------

    def loss_scale(self) -> np.ndarray:
        """The dynamic loss scale logged at each step: halved after an overflow, doubled after
        2,000 steps without one."""
        scale = np.empty(len(self.steps))
        current, clean = 2.0**16, 0
        for step in self.steps:
            scale[step] = current
            if self.overflow[step]:
                current, clean = current / 2, 0
            else:
                clean += 1
                if clean == 2000:
                    current, clean = current * 2, 0
        return scale

    def losses(self) -> pa.Table:
        """The per-sample loss log."""
        return pa.table(
            {
                C.SAMPLE_ID: pa.array(self.ids[self.sample_index].tolist(), pa.string()),
                C.LOSS: pa.array(self.loss, pa.float64()),
                C.STEP: pa.array(self.step, pa.int64()),
                C.EPOCH: pa.array(self.epoch, pa.int64()),
                C.RANK: pa.array(self.rank, pa.int64()),
            }
        )

    def step_log(self, columns: tuple[str, ...] = (C.LR, C.GRAD_NORM, C.LOSS_SCALE)) -> pa.Table:
        """The step log: the batch's mean loss and the optimizer's lr, grad norm and loss scale."""
        loss = self.loss.reshape(len(self.steps), self.batch).mean(axis=1)
        values = {C.LR: self.lr, C.GRAD_NORM: self.grad_norm, C.LOSS_SCALE: self.loss_scale()}
        table = {C.STEP: pa.array(self.steps, pa.int64()), C.LOSS: pa.array(loss)}
        for name in columns:
            table[name] = pa.array(values[name], pa.float64())
        return pa.table(table)


def issue_scenario(seed: int = 0) -> PlantedRun:
    """The run of issue 15: 3,000 steps x 16 samples from 20,000 ids (about 2.4 sightings each),
    loss 2.1 -> 1.6, 30 samples 4-6 nats above the rest, an fp16 overflow (loss scale halving for
    5 steps, whole batch +4.5), a gradient explosion (grad norm 1 -> 4 over 200 steps, then 23.6,
    whole batch +6.5) and a data spike (2 samples at about 40 in a normal batch)."""
    run = PlantedRun(seed=seed)
    run.plant_outliers(30)
    run.plant_fp16_overflow(900)
    run.plant_grad_explosion(1800)
    run.plant_data_spike(2500)
    return run


def everything_at_once(seed: int = 5) -> PlantedRun:
    """Every diagnosis in one run of 2,400 steps x 16 samples from 8,000 ids (4.8 epochs) on 4
    ranks, with NaN losses and overlapping events: a data spike inside an fp16 overflow's streak of
    halvings, one during a grad-norm climb, one just after an lr overshoot; an overflow whose whole
    batch is NaN."""
    run = PlantedRun(steps=2400, batch=16, samples=8000, ranks=4, warmup=100, seed=seed)
    run.plant_outliers(25)
    run.plant_nonfinite_samples(3)
    run.plant_lr_overshoot(120)
    run.plant_data_spike(126, count=3)
    run.plant_fp16_overflow(600, nan=True)
    run.plant_fp16_overflow(1000)
    run.plant_data_spike(1003)
    run.plant_single_rank(1300, rank=2)
    run.plant_data_spike(1850, count=1, loss=80.0)
    run.plant_grad_explosion(1900)
    run.plant_data_spike(2200)
    return run


def main() -> None:
    """Score `analyze` on the planted scenarios: `python -m tests.feedback.planted [SEEDS]`."""
    import sys
    import tempfile
    from pathlib import Path

    import pyarrow.parquet as pq

    from dataclean.feedback.analysis.analyze import analyze

    seeds = [int(s) for s in sys.argv[1:]] or [0]
    for name, make in (("issue 15", issue_scenario), ("everything at once", everything_at_once)):
        for seed in seeds:
            run = make(seed)
            with tempfile.TemporaryDirectory() as folder:
                pq.write_table(run.losses(), Path(folder) / "losses.parquet")
                pq.write_table(run.step_log(), Path(folder) / "steps.parquet")
                found = analyze(Path(folder) / "losses.parquet", Path(folder) / "steps.parquet")
            result = evaluate(
                run.truth,
                [(s.step, s.diagnosis, s.sample_ids) for s in found.spikes],
                set(found.quarantine.column(C.SAMPLE_ID).to_pylist()),
            )
            right = len(result.found) - len(result.misdiagnosed)
            print(
                f"{name}, seed {seed}: {len(run.truth.spikes)} planted spikes, {right} found and "
                f"named right ({len(result.wrong_samples)} blaming other samples), "
                f"{len(result.missed)} missed, {len(result.false_spikes)} false; quarantine "
                f"precision {result.precision:.3f}, recall {result.recall:.3f} "
                f"({len(run.truth.bad_samples)} bad samples planted)"
            )


if __name__ == "__main__":
    main()
