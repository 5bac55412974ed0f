"""From training logs to findings: outlier samples, diagnosed spikes and a quarantine list.

`analyze` reads the per-sample loss log (and the step log and the cleaned corpus when given),
finds loss spikes in the step series (`monitor`; without a step log the series is the per-step
mean of the per-sample losses), diagnoses each (`diagnose`), judges every sample (`outliers`)
without the batches of spikes that are not the samples' fault (`diagnose.EXCUSED`), and builds
the quarantine entries: every outlier sample, and the samples blamed by spikes diagnosed as
`data`. Nothing here writes files; `dataclean.feedback.analysis.cli` does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from dataclean import columns as C
from dataclean.errors import InputError
from dataclean.feedback import schema as S
from dataclean.feedback.analysis.groups import URL, column_values
from dataclean.feedback.analysis.kinds import Kind, kind_columns, review_kinds
from dataclean.feedback.analysis.outliers import find_outliers
from dataclean.feedback.corpus import corpus_files, read_corpus_rows
from dataclean.feedback.detectors import EXCUSED, DiagnosisRules, Spike, diagnose
from dataclean.feedback.logs import Log, read_loss_log, read_step_log
from dataclean.feedback.monitor import (
    SPIKE_K,
    SPIKE_METHOD,
    SPIKE_RATIO,
    SPIKE_WINDOW,
    SpikeMonitor,
    detect_spikes,
)
from dataclean.feedback.robust import robust_z
from dataclean.quarantine.lists import make_list


@dataclass
class Settings:
    """Detector settings (see `find_outliers`, `SpikeMonitor`, `DiagnosisRules`).

    `outliers`: the action of persistent outliers' entries: `review` (listed for a person, applied
    once accepted), `drop` or `downweight` (by `weight`); spike culprits are always `drop`.
    `group_by`: corpus columns to rank kinds of samples by, beyond the usual ones (`kinds`).
    The spike settings default to `monitor.default_monitor`'s (the live guard's), whose ratio is
    lower than `SpikeMonitor`'s own 3x: a more sensitive detector costs a line in the report, not
    an innocent sample, since only a `data` spike convicts samples.
    """

    window: int = 200
    z_threshold: float = 3.5
    spike_window: int = SPIKE_WINDOW
    spike_k: float = SPIKE_K
    spike_ratio: float = SPIKE_RATIO
    spike_method: Literal["std", "mad"] = SPIKE_METHOD
    outliers: Literal["review", "drop", "downweight"] = "review"
    weight: float = 0.1
    rules: DiagnosisRules = field(default_factory=DiagnosisRules)
    group_by: tuple[str, ...] = ()


@dataclass
class Analysis:
    """Everything `dataclean feedback` found, for the outputs and the report."""

    losses: Log
    steps: pa.Table
    steps_derived: bool
    step_log: Log | None
    verdicts: pa.Table
    spikes: list[Spike]
    quarantine: pa.Table
    nonfinite: int = 0
    unknown_ids: list[str] = field(default_factory=list)
    kinds: list[Kind] = field(default_factory=list)
    corpus_rows: int | None = None
    notes: list[str] = field(default_factory=list)


def step_series(losses: pa.Table) -> pa.Table:
    """Per-step loss from a per-sample log: mean of the finite losses (token-weighted if known)."""
    if losses.num_rows == 0 or losses.column(C.STEP).null_count == losses.num_rows:
        return S.STEP_LOG_SCHEMA.empty_table()
    table = losses.filter(pc.is_valid(losses.column(C.STEP)))
    loss = pc.fill_null(table.column(C.LOSS), math.nan).to_numpy(zero_copy_only=False)
    tokens = pc.fill_null(table.column(C.TOKENS), 1).to_numpy(zero_copy_only=False).astype(float)
    finite = np.isfinite(loss)
    steps, index = np.unique(table.column(C.STEP).to_numpy(), return_inverse=True)
    weight = np.where(finite, tokens, 0.0)
    total = np.bincount(index, weights=np.where(finite, loss, 0.0) * weight, minlength=len(steps))
    mass = np.bincount(index, weights=weight, minlength=len(steps))
    mean = np.divide(total, mass, out=np.full(len(steps), np.nan), where=mass > 0)
    nulls = pa.nulls(len(steps), pa.float64())
    return pa.table(
        [pa.array(steps, pa.int64()), pa.array(mean), nulls, nulls, nulls], schema=S.STEP_LOG_SCHEMA
    )


def _spike_scores(spike: Spike, batch: pa.Table) -> dict[str, float]:
    losses = pc.fill_null(batch.column(C.LOSS), math.nan).to_numpy(zero_copy_only=False)
    ids = [str(i) for i in batch.column(C.SAMPLE_ID).to_pylist()]
    finite = np.isfinite(losses)
    if not finite.any():
        return {}
    z = robust_z(np.where(finite, losses, np.inf), losses[finite])
    return {i: float(v) for i, v in zip(ids, z, strict=True) if i in spike.sample_ids}


def analyze(
    losses: str | Path | None,
    steps: str | Path | None = None,
    corpus: str | Path | None = None,
    settings: Settings | None = None,
) -> Analysis:
    """Read the logs, find outliers and spikes, diagnose, and build the quarantine entries.

    `losses` None (`dataclean feedback --megatron` without a per-sample loss log): the spikes of
    the step log alone, diagnosed from it, and no sample judged.
    """
    settings = settings or Settings()
    if losses is not None:
        loss_log = read_loss_log(losses)
    else:
        loss_log = Log(S.LOSS_LOG_SCHEMA.empty_table(), notes=["no per-sample loss log: step log only"])
    step_log = read_step_log(steps) if steps is not None else None
    table = loss_log.table
    loss_values = pc.fill_null(table.column(C.LOSS), math.nan).to_numpy(zero_copy_only=False)

    if step_log is not None and step_log.table.num_rows:
        series, derived = step_log.table, False
    else:
        series, derived = step_series(table), True
    monitor = SpikeMonitor(
        window=settings.spike_window,
        k=settings.spike_k,
        min_ratio=settings.spike_ratio,
        method=settings.spike_method,
    )
    events = detect_spikes(
        series.column(C.STEP).to_numpy(),
        pc.fill_null(series.column(C.LOSS), math.nan).to_numpy(zero_copy_only=False),
        monitor,
    )
    by_step = table.column(C.STEP)
    step_values = pc.fill_null(by_step, -1).to_numpy(zero_copy_only=False)
    calm = ~np.isin(step_values, [e.step for e in events])  # rows of steps that did not spike
    spikes = []
    batches: dict[int, pa.Table] = {}
    for event in events:
        batch = table.filter(pc.equal(by_step, event.step)) if table.num_rows else None
        window = calm & (step_values < event.step) & (step_values >= event.step - settings.spike_window)
        spike = diagnose(event, series, batch, settings.rules, loss_values[window])
        spikes.append(spike)
        if batch is not None and batch.num_rows:
            batches[spike.step] = batch
            if spike.diagnosis in EXCUSED:
                spike.evidence.append(
                    f"the {batch.num_rows} losses of this batch are not counted against its samples "
                    f"({spike.diagnosis} is not the samples' fault)"
                )

    # Samples are judged without the batches of optimizer events: those never convict them.
    excused = [s.step for s in spikes if s.diagnosis in EXCUSED]
    verdicts = find_outliers(
        table, window=settings.window, z_threshold=settings.z_threshold, excused_steps=excused
    )
    entries: dict[str, dict[str, Any]] = {}
    stats = {row[C.SAMPLE_ID]: row for row in verdicts.to_pylist()}
    source = f"feedback:{Path(losses).name if losses is not None else 'steps'}"
    now = datetime.now(timezone.utc).replace(microsecond=0)
    for spike in spikes:
        if spike.diagnosis != "data" or spike.step not in batches:
            continue
        for sample_id, score in _spike_scores(spike, batches[spike.step]).items():
            entries.setdefault(sample_id, {"reason": f"spike:{spike.step}", "score": score, "action": "drop"})

    for row in verdicts.filter(verdicts.column("flagged")).to_pylist():
        found = {"reason": row[C.REASON], "score": row[C.SCORE], "action": settings.outliers}
        entries.setdefault(row[C.SAMPLE_ID], found)

    rows = []
    for sample_id, found in entries.items():
        seen = stats.get(sample_id, {})
        rows.append(
            {
                C.SAMPLE_ID: sample_id,
                C.REASON: found["reason"],
                C.SCORE: found["score"],
                C.FIRST_STEP: seen.get(C.FIRST_STEP),
                C.LAST_STEP: seen.get(C.LAST_STEP),
                C.OCCURRENCES: seen.get("occurrences"),
                C.ACTION: found["action"],
                C.WEIGHT: 0.0 if found["action"] == "drop" else settings.weight,
                C.SOURCE: source,
                C.ADDED_AT: now,
            }
        )
    analysis = Analysis(
        losses=loss_log,
        steps=series,
        steps_derived=derived,
        step_log=step_log,
        verdicts=verdicts,
        spikes=spikes,
        quarantine=make_list(rows),
        nonfinite=int((~np.isfinite(loss_values)).sum()),
    )
    if corpus is not None and table.num_rows:  # without losses no sample is judged
        _attach_corpus(analysis, corpus)
        logged = pc.unique(table.column(C.SAMPLE_ID)).to_pylist()
        groups = read_corpus_groups(corpus, logged, settings.group_by)
        analysis.kinds = review_kinds(verdicts, groups, list(settings.group_by))
    return analysis


def read_corpus_groups(corpus: str | Path, ids: list[str], extra: tuple[str, ...] = ()) -> pa.Table:
    """The corpus rows of `ids` with `id`, `text`, `lang` and every column a kind of sample is
    grouped by (a `struct.field` the user names reads its struct)."""
    dataset = ds.dataset(corpus_files(corpus), format="parquet")
    schema = dataset.schema
    empty = schema.empty_table()
    missing = [c for c in extra if column_values(empty, c) is None]
    if missing:
        names = ", ".join(schema.names)
        raise InputError(str(corpus), f"no column {missing[0]!r} to group by (columns: {names})")
    wanted = [C.ID, C.TEXT, C.LANG, URL, *kind_columns(schema, extra)]
    wanted += [c.partition(".")[0] for c in extra]
    columns = [n for n in dict.fromkeys(wanted) if n in schema.names]
    return dataset.to_table(columns=columns, filter=ds.field(C.ID).isin(ids))


def _attach_corpus(analysis: Analysis, corpus: str | Path) -> None:
    """Fill text hashes and texts from the corpus; note log ids the corpus does not have."""
    logged = pc.unique(analysis.losses.table.column(C.SAMPLE_ID)).to_pylist()
    rows, analysis.corpus_rows = read_corpus_rows(corpus, logged)
    known = set(rows.column(C.ID).to_pylist())
    analysis.unknown_ids = sorted(i for i in logged if i not in known)
    if analysis.unknown_ids:
        analysis.notes.append(
            f"{len(analysis.unknown_ids)} sample ids in the loss log are not in the corpus "
            f"(e.g. {', '.join(analysis.unknown_ids[:5])}); they are judged all the same"
        )
    lookup = {r[C.ID]: r for r in rows.to_pylist()}
    entries = analysis.quarantine.to_pylist()
    for entry in entries:
        row = lookup.get(entry[C.SAMPLE_ID])
        if row is not None:
            entry[C.TEXT_HASH] = row[C.TEXT_HASH]
            entry[C.TEXT] = row[C.TEXT]
    analysis.quarantine = pa.Table.from_pylist(entries, schema=analysis.quarantine.schema)
