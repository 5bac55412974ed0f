"""Run `analyze` on a planted training run written to Parquet (shared by the feedback tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from dataclean.feedback.analysis.analyze import analyze
from tests.feedback.planted import PlantedRun


def analyze_planted(
    tmp_path: Path,
    run: PlantedRun,
    columns: tuple[str, ...] = ("lr", "grad_norm", "loss_scale"),
    steps: bool = True,
) -> Any:
    """The analysis of `run`'s loss log (and its step log with `columns`, unless `steps` is false)."""
    pq.write_table(run.losses(), tmp_path / "losses.parquet")
    step_path = None
    if steps:
        pq.write_table(run.step_log(columns), tmp_path / "steps.parquet")
        step_path = tmp_path / "steps.parquet"
    return analyze(tmp_path / "losses.parquet", step_path)
