"""Follow a training run's logs while it writes them (for `dataclean supervise`).

`LogFollower` hands out the step-log rows written since its last poll, in the order they were
written: from a folder of Parquet files (the guard's `LOGS/steps`: every file is complete when it
appears, so each new file is read once) or from one CSV/JSONL file that grows (only complete
lines are read; the offset is remembered). Column names as the step log's (`step`, `loss`, `lr`,
`grad_norm`, `loss_scale`); Hugging Face's `learning_rate` and `global_step` are understood too.
`step_rows` reads one step's rows of the per-sample loss log, from the files written since a
given time (a relaunched run replays steps a killed one already logged).
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dataclean import columns as C
from dataclean.errors import InputError
from dataclean.feedback import schema as S
from dataclean.feedback.logs import _format_of, log_files
from dataclean.feedback.logs import step_rows as replay_step_rows

ALIASES = {"learning_rate": C.LR, "global_step": C.STEP, "train_loss": C.LOSS}


def _number(value: Any) -> float | None:
    if value is None or value == "":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _normalize(raw: dict[str, Any]) -> dict[str, Any] | None:
    """A step-log row from a logged record; None when it has no step or no loss (e.g. an eval line)."""
    row = {ALIASES.get(key, key): value for key, value in raw.items()}
    step, loss = _number(row.get(C.STEP)), _number(row.get(C.LOSS))
    if step is None or loss is None or math.isnan(step):
        return None
    out: dict[str, Any] = {C.STEP: int(step), C.LOSS: loss}
    for name in (C.LR, C.GRAD_NORM, C.LOSS_SCALE):
        out[name] = _number(row.get(name))
    return out


class LogFollower:
    """The new rows of a growing step log (a Parquet folder or a CSV/JSONL file)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.seen: set[Path] = set()
        self.offset = 0
        self.header: list[str] | None = None
        self.skip_existing()

    def _is_file_log(self) -> bool:
        return self.path.is_file() or (not self.path.exists() and _format_of(self.path) in ("json", "csv"))

    def skip_existing(self) -> None:
        """Pass over everything written so far (an earlier or a killed run's rows)."""
        if self._is_file_log():
            self.offset = self.path.stat().st_size if self.path.exists() else 0
        elif self.path.exists():
            self.seen |= set(log_files(self.path))

    def poll(self) -> list[dict[str, Any]]:
        """Rows written since the last poll, in the order they were written."""
        if not self.path.exists():
            return []
        if self._is_file_log():
            return self._poll_file()
        rows: list[dict[str, Any]] = []
        fresh = [p for p in log_files(self.path) if p not in self.seen]
        for path in sorted(fresh, key=lambda p: (p.stat().st_mtime_ns, p.name)):
            self.seen.add(path)
            if _format_of(path) != "parquet":
                continue
            try:
                table = pq.read_table(path)
            except (OSError, pa.ArrowInvalid) as error:
                raise InputError(str(path), f"cannot read the step log: {error}") from None
            rows += [r for r in (_normalize(raw) for raw in table.to_pylist()) if r is not None]
        return rows

    def _poll_file(self) -> list[dict[str, Any]]:
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            data = handle.read()
        end = data.rfind(b"\n") + 1  # complete lines only: the writer may be mid-line
        if end == 0:
            return []
        self.offset += end
        text = data[:end].decode("utf-8", errors="replace")
        if _format_of(self.path) == "json":
            records = []
            for line in text.splitlines():
                if line.strip():
                    try:
                        records.append(json.loads(line))
                    except json.JSONDecodeError:
                        continue  # a line that is not a record (a trainer's banner): not a step
        else:
            lines = text.splitlines()
            if self.header is None:
                self.header, lines = next(csv.reader([lines[0]])), lines[1:]
            records = [
                dict(zip(self.header, values, strict=False))
                for values in csv.reader(io.StringIO("\n".join(lines)))
            ]
        return [r for r in (_normalize(raw) for raw in records) if r is not None]


def step_rows(losses: str | Path, step: int, since: float) -> pa.Table | None:
    """The loss-log rows of `step` (LOSS_LOG_SCHEMA): from a Parquet folder, only files written at
    or after `since` (a Unix time); one row per sample, the last logged (a replayed step's)."""
    if not Path(losses).exists():
        return None
    rows = replay_step_rows(losses, step, since=since).to_pylist()
    last = {row[C.SAMPLE_ID]: row for row in rows}
    return pa.Table.from_pylist(list(last.values()), schema=S.LOSS_LOG_SCHEMA)
