"""Evaluation sets to decontaminate against: named sources of items, each item a few text fields.

An eval set is named by the user (`NAME=PATH_OR_URI`) or after its file or folder (`PATH_OR_URI`,
the name its last path part without extensions). A source is a file or a folder (searched
recursively) of JSONL (`.jsonl`, `.json`, optionally `.gz`/`.zst`) or Parquet files, or a folder
written by Hugging Face `datasets`' `save_to_disk` (a Dataset or a DatasetDict: every split).
Local paths and any URI pyarrow opens (s3://, gs://, hdfs://) work.

The text fields of an item are the fields named by `fields`, or else every string field (and every
list of strings, such as a multiple-choice question's `choices`: each element a field). An item is
identified by its `id` field when it has one, else by its row number within the set (files in
name order, from 0).
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from dataclean.errors import ConfigError, InputError
from dataclean.io import hf
from dataclean.io.files import open_input
from dataclean.io.shards import discover, filesystem

ID_FIELD = "id"
BATCH_ROWS = 4096


@dataclass(frozen=True)
class EvalSet:
    """One named eval set and where it is."""

    name: str
    uri: str


def parse_eval_sets(specs: Sequence[str]) -> list[EvalSet]:
    """`NAME=PATH_OR_URI` or `PATH_OR_URI` strings as eval sets; names must be unique."""
    found = []
    for spec in specs:
        name, sep, uri = spec.partition("=")
        if not sep or "://" in name or "/" in name:
            name, uri = _default_name(spec), spec
        name, uri = name.strip(), uri.strip()
        if not name or not uri:
            raise ConfigError(f"decontaminate.evals: {spec!r} is not NAME=PATH or PATH")
        found.append(EvalSet(name, uri))
    names = [s.name for s in found]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"decontaminate.evals: two eval sets named {repeated[0]!r} (name them: NAME=PATH)")
    return found


def _default_name(uri: str) -> str:
    base = posixpath.basename(uri.rstrip("/"))
    for suffix in (".gz", ".zst", ".jsonl", ".json", ".parquet"):
        base = base.removesuffix(suffix)
    return base


@dataclass
class Batch:
    """Items of one eval set: their ids, and (item row in this batch, text) for every field."""

    ids: list[str]
    rows: list[int]
    texts: list[str]


def read_eval_set(
    eval_set: EvalSet, fields: Sequence[str], scratch: str, batch_rows: int = BATCH_ROWS
) -> Iterator[Batch]:
    """The set's items in batches (see the module docstring); `scratch` takes exported HF data."""
    number = 0
    for table in _tables(eval_set, scratch, batch_rows):
        batch = _batch(table, fields, number, eval_set)
        number += table.num_rows
        yield batch


def _tables(eval_set: EvalSet, scratch: str, batch_rows: int) -> Iterator[pa.Table]:
    uri = eval_set.uri
    paths: list[str]
    if "://" not in uri and hf.is_saved_dataset(uri):
        paths = hf.export(hf.load(uri), posixpath.join(scratch, "hf"), eval_set.name)
        formats = ["parquet"] * len(paths)
    else:
        try:
            shards = discover([uri])
        except InputError as error:
            raise ConfigError(f"decontaminate.evals: eval set {eval_set.name!r}: {error}") from None
        paths, formats = [s.uri for s in shards], [s.format for s in shards]
    for path, fmt in zip(paths, formats, strict=True):
        if fmt == "parquet":
            with open_input(path) as source:
                yield from (
                    pa.Table.from_batches([b]) for b in pq.ParquetFile(source).iter_batches(batch_rows)
                )
        elif fmt == "jsonl":
            yield from _jsonl_tables(path, batch_rows)
        else:
            raise ConfigError(f"decontaminate.evals: {path}: eval sets are JSONL or Parquet, not {fmt}")


def _jsonl_tables(path: str, batch_rows: int) -> Iterator[pa.Table]:
    fs, local = filesystem(path)
    records: list[dict[str, object]] = []
    with fs.open_input_stream(local, compression="detect") as stream:
        # Lines end at "\n" only: a JSON string may hold U+2028 or U+0085 (str.splitlines would cut).
        for number, line in enumerate(stream.read().decode("utf-8").split("\n")):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise InputError(path, f"invalid JSON: {error}", row=number) from None
            if not isinstance(record, dict):
                raise InputError(path, "JSON line is not an object", row=number)
            records.append(record)
            if len(records) >= batch_rows:
                yield _records_table(records)
                records = []
    if records:
        yield _records_table(records)


def _records_table(records: list[dict[str, object]]) -> pa.Table:
    """Records as a table of Python values (types differ between eval sets and lines)."""
    names = list(dict.fromkeys(key for record in records for key in record))
    return pa.table({name: _column([record.get(name) for record in records]) for name in names})


def _column(values: list[object]) -> pa.Array:
    """One field's values; a field of mixed types becomes JSON text (still searched)."""
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([json.dumps(v, ensure_ascii=False) if v is not None else None for v in values])


def _is_text(field_type: pa.DataType) -> bool:
    return bool(pa.types.is_string(field_type) or pa.types.is_large_string(field_type))


def _batch(table: pa.Table, fields: Sequence[str], first: int, eval_set: EvalSet) -> Batch:
    if fields:
        missing = [name for name in fields if name not in table.column_names]
        if missing:
            raise ConfigError(
                f"decontaminate.fields: eval set {eval_set.name!r} has no field {missing[0]!r} "
                f"(fields: {', '.join(table.column_names)})"
            )
        chosen = list(fields)
    else:
        chosen = [
            name
            for name, field_type in zip(table.column_names, table.schema.types, strict=True)
            if name != ID_FIELD
            and (_is_text(field_type) or (pa.types.is_list(field_type) and _is_text(field_type.value_type)))
        ]
    if ID_FIELD in table.column_names:
        ids = [
            str(v) if v is not None else str(first + k)
            for k, v in enumerate(table.column(ID_FIELD).to_pylist())
        ]
    else:
        ids = [str(first + k) for k in range(table.num_rows)]
    rows: list[int] = []
    texts: list[str] = []
    for name in chosen:
        for row, value in enumerate(table.column(name).to_pylist()):
            for text in value if isinstance(value, list) else [value]:
                if isinstance(text, str) and text:
                    rows.append(row)
                    texts.append(text)
    return Batch(ids, rows, texts)
