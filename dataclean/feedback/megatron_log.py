"""Megatron-LM's iteration log lines read as a step log.

Megatron-LM's `training_log` (megatron/training/training.py) prints, every `--log-interval`
iterations, one line of ` | `-separated fields:

     [2026-12-02 12:00:00.123456] iteration      100/   10000 | consumed samples:         3200 |
     elapsed time per iteration (ms): 1234.5 | learning rate: 3.000000E-04 | global batch size:
     32 | lm loss: 5.123456E+00 | loss scale: 1.0 | grad norm: 1.234 | number of skipped
     iterations:   0 | number of nan iterations:   0 |

(one line; throughput, skipped samples, num zeros, params norm and other losses appear when
enabled). The loss is the mean over the interval's advanced iterations; the skipped and nan
counts are the interval's. A launcher may put a prefix before it (`[default0]:`); anything that is
not such a line (warnings, timers) is skipped. `read_megatron_steps` gives the step log columns
(`step` = iteration, `loss` = lm loss, `lr`, `grad_norm`, `loss_scale`) plus `consumed_samples`,
`global_batch_size`, `skipped_iterations` and `nan_iterations`; `is_megatron_log` tells such a file
from the Parquet/JSONL/CSV step logs by its first lines.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from dataclean import columns as C
from dataclean.errors import InputError
from dataclean.feedback import schema as S

if TYPE_CHECKING:
    from dataclean.feedback.logs import Log

ITERATION = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|")
FIELD = re.compile(r"\|\s*([A-Za-z][A-Za-z0-9_ ()/\-]*?):\s*([-+0-9.eEinfINFaN]+)\s*(?=\|)")
CONSUMED_SAMPLES = "consumed_samples"
GLOBAL_BATCH_SIZE = "global_batch_size"
SKIPPED_ITERATIONS = "skipped_iterations"
NAN_ITERATIONS = "nan_iterations"
# Megatron's field name -> (column, type)
FIELDS: dict[str, tuple[str, type]] = {
    "lm loss": (C.LOSS, float),
    "learning rate": (C.LR, float),
    "grad norm": (C.GRAD_NORM, float),
    "loss scale": (C.LOSS_SCALE, float),
    "consumed samples": (CONSUMED_SAMPLES, int),
    "global batch size": (GLOBAL_BATCH_SIZE, int),
    "number of skipped iterations": (SKIPPED_ITERATIONS, int),
    "number of nan iterations": (NAN_ITERATIONS, int),
}
MEGATRON_SCHEMA = pa.schema(
    [
        *S.STEP_LOG_SCHEMA,
        (CONSUMED_SAMPLES, pa.int64()),
        (GLOBAL_BATCH_SIZE, pa.int64()),
        (SKIPPED_ITERATIONS, pa.int64()),
        (NAN_ITERATIONS, pa.int64()),
    ]
)
SNIFF_LINES = 2000


def parse_line(line: str) -> dict[str, float | int | None] | None:
    """The fields of one iteration log line (None: not one)."""
    found = ITERATION.search(line)
    if found is None:
        return None
    row: dict[str, float | int | None] = {name: None for name in MEGATRON_SCHEMA.names}
    row[C.STEP] = int(found.group(1))
    for name, value in FIELD.findall("|" + line[found.end() :]):
        known = FIELDS.get(name.strip())
        if known is None:
            continue
        column, kind = known
        try:
            row[column] = kind(float(value)) if kind is int else float(value)
        except ValueError:
            row[column] = None
    return row


def is_megatron_log(path: str | Path) -> bool:
    """Whether a file (not a folder) holds Megatron iteration log lines among its first lines."""
    file = Path(path)
    tables = {".parquet", ".jsonl", ".ndjson", ".json", ".csv", ".tsv"}
    if not file.is_file() or file.suffix.lower() in tables:
        return False
    with file.open(encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle):
            if number >= SNIFF_LINES:
                return False
            if ITERATION.search(line) and "consumed samples" in line:
                return True
    return False


def read_megatron_steps(path: str | Path) -> pa.Table:
    """Every iteration line of a Megatron-LM log, sorted by iteration (the last line wins when a
    restarted run logs an iteration again)."""
    rows: dict[int, dict[str, float | int | None]] = {}
    try:
        with Path(path).open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                row = parse_line(line)
                if row is not None:
                    rows[int(row[C.STEP] or 0)] = row
    except OSError as error:
        raise InputError(str(path), f"cannot read the Megatron log: {error}") from error
    ordered = [rows[step] for step in sorted(rows)]
    return pa.Table.from_pylist(ordered, schema=MEGATRON_SCHEMA)


def logged_batches(path: str | Path) -> dict[int, tuple[int | None, int | None]]:
    """iteration -> (consumed samples, global batch size) as the log printed them: where the
    samples of an iteration start even in a resumed run or one whose batch size ramped up."""
    table = read_megatron_steps(path).select([C.STEP, CONSUMED_SAMPLES, GLOBAL_BATCH_SIZE])
    return {int(r[C.STEP]): (r[CONSUMED_SAMPLES], r[GLOBAL_BATCH_SIZE]) for r in table.to_pylist()}


def megatron_notes(table: pa.Table) -> list[str]:
    """What the report should say about a Megatron log: skipped and nan iterations."""
    notes = ["read as Megatron-LM iteration log lines (loss: lm loss, averaged over each log interval)"]
    for column, what in ((SKIPPED_ITERATIONS, "skipped"), (NAN_ITERATIONS, "nan")):
        values = [v for v in table.column(column).to_pylist() if v]
        if values:
            notes.append(f"{sum(values)} {what} iterations logged (the optimizer step was not taken)")
    return notes


def megatron_step_log(path: str | Path) -> Log:
    """A Megatron-LM log as `dataclean.feedback.logs.read_step_log` returns a step log."""
    from dataclean.feedback.logs import Log

    table = read_megatron_steps(path)
    steps = table.select(S.STEP_LOG_SCHEMA.names).filter(pc.is_valid(table.column(C.STEP)))
    optional = [name for name in S.STEP_LOG_SCHEMA.names if name not in S.STEP_LOG_REQUIRED]
    missing = [name for name in optional if steps.column(name).null_count == steps.num_rows]
    log = Log(table=steps, files=[str(path)], missing=missing, notes=megatron_notes(table))
    if not steps.num_rows:
        log.notes.append("the step log is empty")
    return log
