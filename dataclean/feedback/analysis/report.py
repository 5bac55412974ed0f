"""What `dataclean feedback` writes for people: a markdown report and a picture of the run.

The report lists every spike with its diagnosis, evidence and action, then every quarantined
sample with its reason, score, steps and a text excerpt, then what the logs lacked. The picture
(`training.png`) plots loss, lr, grad norm and loss scale against step with spikes marked, one
colour per diagnosis; it needs matplotlib, imported here only.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean import columns as C
from dataclean.feedback.analysis.analyze import Analysis
from dataclean.feedback.analysis.kinds import kinds_markdown
from dataclean.feedback.detectors import EXCUSED, Spike

COLOURS = {
    "grad_explosion": "tab:red",
    "fp16_overflow": "tab:purple",
    "data": "tab:orange",
    "lr_overshoot": "tab:green",
    "single_rank": "tab:brown",
    "unknown": "tab:gray",
}


def _number(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else value


def spike_records(spikes: list[Spike]) -> list[dict[str, Any]]:
    """spikes.json: one object per spike (step, loss, diagnosis, evidence, action, sample_ids)."""
    return [
        {
            "step": spike.step,
            "loss": _number(spike.loss) if math.isfinite(spike.loss) else str(spike.loss),
            "level": _number(spike.level),
            "diagnosis": spike.diagnosis,
            "evidence": spike.evidence,
            "action": spike.action,
            "sample_ids": spike.sample_ids,
            "missing": spike.missing,
        }
        for spike in spikes
    ]


def write_spikes(spikes: list[Spike], path: Path) -> None:
    """Write spikes.json (atomically)."""
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(json.dumps(spike_records(spikes), indent=2, ensure_ascii=False) + "\n")
    temp.replace(path)


def _excerpt(text: str | None, limit: int = 160) -> str:
    if not text:
        return ""
    flat = " ".join(text.split())
    flat = flat if len(flat) <= limit else flat[: limit - 3] + "..."
    return flat.replace("|", "\\|").replace("`", "'")


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def _excused(analysis: Analysis) -> int:
    verdicts = analysis.verdicts
    if verdicts.num_rows == 0 or "excused" not in verdicts.column_names:
        return 0
    return int(pc.sum(verdicts.column("excused")).as_py() or 0)


def markdown(analysis: Analysis, quarantine: pa.Table, picture: str | None) -> str:
    """The report as markdown. `quarantine` is the written (possibly merged) list."""
    losses = analysis.losses.table
    lines = ["# Training feedback", ""]
    samples = len(pc.unique(losses.column(C.SAMPLE_ID))) if losses.num_rows else 0
    lines += [
        f"- loss log: {losses.num_rows} rows, {samples} samples, {len(analysis.losses.files)} files",
        f"- non-finite losses: {analysis.nonfinite}",
        f"- steps: {analysis.steps.num_rows}"
        + (" (per-step means of the per-sample log: no step log)" if analysis.steps_derived else ""),
        f"- spikes: {len(analysis.spikes)}",
        f"- losses not counted against their samples (batches of spikes that are not the samples' "
        f"fault: {', '.join(sorted(EXCUSED))}): {_excused(analysis)}",
        f"- quarantined by this analysis: {analysis.quarantine.num_rows}; "
        f"in the written list: {quarantine.num_rows}",
    ]
    if analysis.corpus_rows is not None:
        lines.append(f"- corpus: {analysis.corpus_rows} rows; log ids not in it: {len(analysis.unknown_ids)}")
    missing = [f"loss log: {', '.join(analysis.losses.missing)}"] if analysis.losses.missing else []
    if analysis.step_log is not None and analysis.step_log.missing:
        missing.append(f"step log: {', '.join(analysis.step_log.missing)}")
    if missing:
        lines.append(f"- optional columns missing ({'; '.join(missing)})")
    for note in analysis.losses.notes + (analysis.step_log.notes if analysis.step_log else []):
        lines.append(f"- {note}")
    lines += [f"- {note}" for note in analysis.notes]
    if picture:
        lines += ["", f"![loss, lr, grad norm and loss scale by step]({picture})"]

    lines += ["", "## Spikes", ""]
    if not analysis.spikes:
        lines.append("No loss spike was found.")
    for spike in analysis.spikes:
        lines += [
            f"### Step {spike.step}: {spike.diagnosis}",
            "",
            *(f"- {item}" for item in spike.evidence),
        ]
        if spike.missing:
            lines.append(f"- not known: {', '.join(spike.missing)}")
        if spike.sample_ids:
            shown = ", ".join(spike.sample_ids[:20])
            more = len(spike.sample_ids) - 20
            lines.append(f"- samples blamed: {shown}" + (f" and {more} more" if more > 0 else ""))
        lines += [f"- action: {spike.action}", ""]

    lines += ["", *kinds_markdown(analysis.kinds)] if analysis.corpus_rows is not None else []
    lines += ["", "## Quarantined samples", ""]
    if quarantine.num_rows == 0:
        lines.append("None.")
    else:
        lines += [
            "| sample_id | reason | score | steps | seen | action | excerpt |",
            "|---|---|---|---|---|---|---|",
        ]
        rows = sorted(quarantine.to_pylist(), key=lambda r: -(r[C.SCORE] or 0.0))
        for row in rows:
            steps = f"{_fmt(row[C.FIRST_STEP])}-{_fmt(row[C.LAST_STEP])}"
            lines.append(
                f"| {row[C.SAMPLE_ID]} | {row[C.REASON]} | {_fmt(row[C.SCORE])} | {steps} | "
                f"{_fmt(row[C.OCCURRENCES])} | {row[C.ACTION]} | {_excerpt(row[C.TEXT])} |"
            )
    return "\n".join(lines) + "\n"


def plot(analysis: Analysis, path: Path) -> bool:
    """Draw loss / lr / grad norm / loss scale against step with spikes marked; False if the
    step series is empty or matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    steps = analysis.steps
    if steps.num_rows == 0:
        return False
    x = steps.column(C.STEP).to_numpy()
    panels = [C.LOSS] + [
        name for name in (C.LR, C.GRAD_NORM, C.LOSS_SCALE) if steps.column(name).null_count < steps.num_rows
    ]
    figure, axes = plt.subplots(len(panels), 1, sharex=True, figsize=(11, 2.2 * len(panels) + 0.6))
    axes = np.atleast_1d(axes)
    for axis, name in zip(axes, panels, strict=False):
        values = pc.fill_null(steps.column(name), math.nan).to_numpy(zero_copy_only=False)
        axis.plot(x, values, linewidth=0.8, color="tab:blue")
        axis.set_ylabel(name)
        if name == C.LOSS_SCALE:
            axis.set_yscale("log", base=2)
        for spike in analysis.spikes:
            axis.axvline(spike.step, color=COLOURS[spike.diagnosis], alpha=0.6, linewidth=1)
    loss_axis = axes[0]
    seen: set[str] = set()
    for spike in analysis.spikes:
        label = None if spike.diagnosis in seen else spike.diagnosis
        seen.add(spike.diagnosis)
        y = spike.loss if math.isfinite(spike.loss) else np.nanmax(loss_axis.get_ylim())
        loss_axis.scatter([spike.step], [y], color=COLOURS[spike.diagnosis], zorder=3, label=label)
    if seen:
        loss_axis.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small", title="diagnosis")
    axes[-1].set_xlabel("step")
    figure.suptitle("Training run: spikes marked by diagnosis")
    figure.tight_layout()
    temp = path.with_name(f".{path.name}.tmp.png")
    figure.savefig(temp, dpi=110)
    plt.close(figure)
    temp.replace(path)
    return True
