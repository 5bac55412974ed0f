"""Read per-sample loss logs and step logs: Parquet, JSONL or CSV; one file or a folder of them.

Both readers return a table with the schema of `dataclean.feedback.schema` (optional columns that
the log lacks are all-null) plus notes for the report: which files were read, which optional
columns were missing, rows that could not be used. A required column that is missing is an
`InputError` naming the file; an empty log is not an error (the analysis then finds nothing).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.dataset as ds
import pyarrow.json as pajson
import pyarrow.parquet as pq

from dataclean import columns as C
from dataclean.errors import InputError
from dataclean.feedback import schema as S
from dataclean.feedback.megatron_log import is_megatron_log, megatron_step_log

_FORMATS = {
    ".parquet": "parquet",
    ".jsonl": "json",
    ".ndjson": "json",
    ".json": "json",
    ".csv": "csv",
    ".tsv": "tsv",
}
_COMPRESSED = (".gz", ".bz2", ".zst")


@dataclass
class Log:
    """A log normalized to its schema, with what the report should say about it."""

    table: pa.Table
    files: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def has(self, column: str) -> bool:
        """True when at least one file had this column with at least one value."""
        return column not in self.missing


def _format_of(path: Path) -> str | None:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in _COMPRESSED:
        suffixes = suffixes[:-1]
    return _FORMATS.get(suffixes[-1]) if suffixes else None


def log_files(path: str | Path) -> list[Path]:
    """The log files under `path` (itself if a file), sorted; hidden and temp files skipped."""
    root = Path(path)
    if not root.exists():
        raise InputError(str(root), "no such file or folder")
    if root.is_file():
        return [root]
    files = [
        p
        for p in sorted(root.rglob("*"))
        if p.is_file()
        and not any(part.startswith(".") for part in p.relative_to(root).parts)
        and not p.name.endswith(".tmp")
        and _format_of(p) is not None
    ]
    return files


def _read_json_lines(path: Path) -> pa.Table:
    """JSONL through Python's json, which accepts the NaN/Infinity that training loops write."""
    import gzip

    opener = gzip.open if path.suffix == ".gz" else open
    rows = []
    with opener(path, "rt", encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise InputError(str(path), f"not JSON: {error.msg}", row=number) from None
    return pa.Table.from_pylist(rows)


def _read_file(path: Path, types: dict[str, pa.DataType]) -> pa.Table:
    kind = _format_of(path)
    if path.stat().st_size == 0:
        return pa.table({})
    try:
        if kind == "parquet":
            return pq.read_table(path)
        if kind in ("csv", "tsv"):
            return pacsv.read_csv(
                path,
                parse_options=pacsv.ParseOptions(delimiter="\t" if kind == "tsv" else ","),
                # "nan"/"inf" are values (evidence), not missing: only empty cells are null.
                convert_options=pacsv.ConvertOptions(column_types=types, null_values=["", "null", "None"]),
            )
        if kind == "json":
            try:
                return pajson.read_json(path)
            except pa.ArrowInvalid:
                return _read_json_lines(path)
    except (pa.ArrowInvalid, OSError) as error:
        raise InputError(str(path), f"cannot read as {kind}: {error}") from None
    raise InputError(str(path), "unknown log format (use .parquet, .jsonl or .csv)")


def _normalize(table: pa.Table, schema: pa.Schema, path: Path) -> pa.Table:
    arrays = []
    for column in schema:
        if column.name in table.column_names:
            values = table.column(column.name)
            if pa.types.is_null(values.type):
                values = pa.nulls(len(values), column.type)
            try:
                values = values.cast(column.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                if pa.types.is_floating(column.type):  # "nan", "inf" as strings
                    values = pa.array([_float_or_none(v) for v in values.to_pylist()], type=column.type)
                else:
                    raise InputError(str(path), f"column {column.name!r} is not {column.type}") from None
            arrays.append(values)
        else:
            arrays.append(pa.nulls(table.num_rows, column.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _float_or_none(value: object) -> float | None:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _read_log(path: str | Path, schema: pa.Schema, required: tuple[str, ...], what: str) -> Log:
    types = {f.name: f.type for f in schema}
    tables: list[pa.Table] = []
    log = Log(table=schema.empty_table())
    seen: set[str] = set()
    for file in log_files(path):
        raw = _read_file(file, types)
        log.files.append(str(file))
        if raw.num_rows == 0:
            continue
        lacking = [name for name in required if name not in raw.column_names]
        if lacking:
            found = ", ".join(raw.column_names) or "none"
            raise InputError(str(file), f"{what} needs column(s) {', '.join(lacking)} (found: {found})")
        table = _normalize(raw, schema, file)
        seen.update(name for name in table.column_names if table.column(name).null_count < len(table))
        tables.append(table)
    if tables:
        log.table = pa.concat_tables(tables)
    log.missing = [name for name in schema.names if name not in required and name not in seen]
    if not log.files:
        log.notes.append(f"no {what} files found under {path}")
    elif log.table.num_rows == 0:
        log.notes.append(f"the {what} is empty")
    return log


def read_loss_log(path: str | Path) -> Log:
    """Read a per-sample loss log. Rows with `tokens == 0` (nothing was scored) are left out."""
    log = _read_log(path, S.LOSS_LOG_SCHEMA, S.LOSS_LOG_REQUIRED, "loss log")
    table = log.table
    null_ids = table.column(C.SAMPLE_ID).null_count
    if null_ids:
        table = table.filter(pc.is_valid(table.column(C.SAMPLE_ID)))
        log.notes.append(f"{null_ids} rows without a sample_id were left out")
    if log.has(C.TOKENS):
        empty = pc.fill_null(pc.equal(table.column(C.TOKENS), 0), False)
        dropped = pc.sum(empty).as_py() or 0
        if dropped:
            table = table.filter(pc.invert(empty))
            log.notes.append(f"{dropped} rows with tokens == 0 were left out")
    log.table = table
    return log


def read_step_log(path: str | Path) -> Log:
    """Read a step log; several rows for one step (e.g. one per rank) are averaged."""
    if is_megatron_log(path):  # Megatron-LM's iteration lines (dataclean.feedback.megatron_log)
        return megatron_step_log(path)
    log = _read_log(path, S.STEP_LOG_SCHEMA, S.STEP_LOG_REQUIRED, "step log")
    table = log.table.filter(pc.is_valid(log.table.column(C.STEP)))
    if table.num_rows and len(pc.unique(table.column(C.STEP))) < table.num_rows:
        grouped = table.group_by(C.STEP).aggregate(
            [(name, "mean") for name in table.column_names if name != C.STEP]
        )
        renamed = {f"{name}_mean": name for name in table.column_names}
        grouped = grouped.rename_columns([renamed.get(n, n) for n in grouped.column_names])
        table = grouped.select(S.STEP_LOG_SCHEMA.names).cast(S.STEP_LOG_SCHEMA)
        log.notes.append("several rows per step were averaged")
    log.table = table.sort_by(C.STEP)
    return log


def step_rows(losses: str | Path, step: int, since: float | None = None) -> pa.Table:
    """The loss log's rows of one step. A folder of Parquet files is filtered while it is read
    (a long run's log need not fit in memory), from the files written at or after `since` (a Unix
    time: a relaunched run's, `dataclean supervise`) when given; other formats are read whole."""
    files = log_files(losses)
    if since is not None and files and all(_format_of(f) == "parquet" for f in files):
        files = [f for f in files if f.stat().st_mtime >= since - 1]
        if not files:
            return S.LOSS_LOG_SCHEMA.empty_table()
    if files and all(_format_of(f) == "parquet" for f in files):
        dataset = ds.dataset([str(f) for f in files], format="parquet")
        if C.STEP not in dataset.schema.names:
            raise InputError(str(losses), "the loss log has no 'step' column: steps cannot be replayed")
        table = dataset.to_table(filter=ds.field(C.STEP) == step)
        columns = [
            table.column(f.name).cast(f.type)
            if f.name in table.column_names
            else pa.nulls(len(table), f.type)
            for f in S.LOSS_LOG_SCHEMA
        ]
        return pa.Table.from_arrays(columns, schema=S.LOSS_LOG_SCHEMA)
    log = read_loss_log(losses)
    if not log.has(C.STEP):
        raise InputError(str(losses), "the loss log has no 'step' column: steps cannot be replayed")
    return log.table.filter(pc.fill_null(pc.equal(log.table.column(C.STEP), step), False))
