"""Read input shards as a stream of Arrow batches in the row contract.

Every batch has `id`, `text`, `parent_id` (= id), `bad_bytes` (undecodable bytes removed from
the text) and the input's other columns, carried through unchanged. Rows the reader cannot turn
into a sample (null text, a line that is not JSON, text that is not a string) carry a drop reason
and reach the exclusion log as stage `read`; with `on_error="raise"` the last two are instead an
`InputError` naming the file and the line (from 1, as an editor numbers it; blank lines count).
A compressed stream that breaks midway is an `InputError` saying in which line it broke; with
`on_error="skip"` the rows read whole before it are yielded first (the runner logs the rest of
the shard as one excluded record). A batch never holds more than `batch_rows` rows or about
`batch_bytes` of text, so a worker's memory is bounded by the batch, not by the shard.
"""

from __future__ import annotations

import bz2
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq
import zstandard

from dataclean import columns as C
from dataclean.errors import ConfigError, InputError
from dataclean.io.decode import decode_utf8
from dataclean.io.shards import Shard, filesystem

CHUNK_BYTES = 8 << 20
OnError = Literal["raise", "skip"]


@dataclass(frozen=True)
class ReadOptions:
    """How to read inputs: which columns hold text and ids, how text files split into documents.

    `text_unit`: `line` = one document per non-blank line of a .txt file, `file` = the whole file
    is one document. `id_column`: used when the input has it; rows without a value get a derived id.
    """

    text_column: str = C.TEXT
    id_column: str = C.ID
    text_unit: Literal["line", "file"] = "line"
    batch_rows: int = 2048
    batch_bytes: int = 32 << 20
    on_error: OnError = "raise"

    def __post_init__(self) -> None:
        if self.batch_rows < 1:
            raise ConfigError(f"batch_rows must be at least 1, got {self.batch_rows}")
        if self.text_unit not in ("line", "file"):
            raise ConfigError(f"text_unit must be 'line' or 'file', got {self.text_unit!r}")
        if self.on_error not in ("raise", "skip"):
            raise ConfigError(f"on_error must be 'raise' or 'skip', got {self.on_error!r}")


class _BatchBuilder:
    """Collects decoded records of one shard and emits contract batches."""

    def __init__(self, shard: Shard, options: ReadOptions) -> None:
        self.shard = shard
        self.options = options
        self.row = 0
        self.line = 0  # of the file, from 1, for line formats: the line last read
        self._reset()

    def _reset(self) -> None:
        self.first_row = self.row
        self.ids: list[str] = []
        self.texts: list[str | None] = []
        self.bad: list[int] = []
        self.reasons: list[str | None] = []
        self.extras: list[dict[str, Any]] = []
        self.bytes = 0

    def add(
        self,
        text: str | None,
        bad_bytes: int = 0,
        record_id: Any = None,
        extra: dict[str, Any] | None = None,
        reason: str | None = None,
    ) -> None:
        self.ids.append(str(record_id) if record_id is not None else f"{self.shard.name}:{self.row}")
        self.texts.append(text)
        self.bad.append(bad_bytes)
        self.reasons.append(reason if reason else ("null_text" if text is None else None))
        self.extras.append(extra or {})
        self.bytes += len(text) if text else 0
        self.row += 1

    def full(self) -> bool:
        return len(self.ids) >= self.options.batch_rows or self.bytes >= self.options.batch_bytes

    def emit(self) -> Iterator[pa.Table]:
        """The collected rows as one batch, if there are any."""
        table = self.flush()
        if table is not None:
            yield table

    def flush(self) -> pa.Table | None:
        if not self.ids:
            return None
        data: dict[str, pa.Array] = {
            C.ID: pa.array(self.ids, pa.string()),
            C.TEXT: pa.array(self.texts, pa.string()),
            C.PARENT_ID: pa.array(self.ids, pa.string()),
            C.BAD_BYTES: pa.array(self.bad, pa.int64()),
        }
        keys = dict.fromkeys(k for extra in self.extras for k in extra)
        for key in keys:
            values = [extra.get(key) for extra in self.extras]
            try:
                data[_carried_name(key)] = pa.array(values)
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                # Mixed types in one field: keep every value, as its JSON text.
                data[_carried_name(key)] = pa.array(
                    [None if v is None else json.dumps(v, ensure_ascii=False) for v in values]
                )
        data[C.DROP_REASON] = pa.array(self.reasons, pa.string())
        table = pa.table(data)
        self._reset()
        return table


def _carried_name(key: str) -> str:
    """Input columns whose names dataclean owns are kept under an `input_` prefix."""
    owned = (
        C.ID,
        C.TEXT,
        C.PARENT_ID,
        C.BAD_BYTES,
        C.DROP_REASON,
        C.COPY_REASON,
        C.STAGE,
        C.REASON,
        C.ACTION,
    )
    return f"input_{key}" if key in owned else key


def _decompressor(path: str) -> Any:
    """A streaming decompressor with `.eof` and `.unused_data` for the path's suffix, or None."""
    lowered = path.lower()
    if lowered.endswith(".gz"):
        return zlib.decompressobj(wbits=31)
    if lowered.endswith(".zst"):
        return zstandard.ZstdDecompressor().decompressobj()
    if lowered.endswith(".bz2"):
        return bz2.BZ2Decompressor()
    return None


class _StreamBroken(Exception):
    """A compressed stream that breaks after `decompressed` bytes (turned into an `InputError`
    naming the row it broke in by whoever counts rows)."""

    def __init__(self, detail: str, decompressed: int) -> None:
        super().__init__(detail)
        self.detail = detail
        self.decompressed = decompressed


def _chunks(shard: Shard) -> Iterator[bytes]:
    """The shard's bytes, decompressed; a truncated or corrupt stream raises `_StreamBroken`.

    (pyarrow's own compressed streams end quietly at a truncated .gz, which would lose rows.)
    """
    fs, path = filesystem(shard.uri)
    try:
        stream = fs.open_input_stream(path, compression=None)
    except (OSError, pa.ArrowException) as error:
        raise InputError(shard.label, f"cannot open: {error}") from None
    decompressor = _decompressor(path)
    produced = 0
    with stream:
        try:
            while chunk := stream.read(CHUNK_BYTES):
                if decompressor is None:
                    yield chunk
                    continue
                while chunk:
                    out = decompressor.decompress(chunk)
                    produced += len(out)
                    yield out
                    chunk = b""
                    if decompressor.eof and decompressor.unused_data:  # next member/frame
                        chunk = decompressor.unused_data
                        decompressor = _decompressor(path)
            if decompressor is not None and not decompressor.eof:
                raise _StreamBroken("truncated: the compressed stream ends early", produced)
        except (OSError, pa.ArrowException, EOFError, zlib.error, zstandard.ZstdError) as error:
            raise _StreamBroken(f"cannot read (corrupt or truncated): {error}", produced) from None


def _lines(shard: Shard) -> Iterator[bytes]:
    """The shard's lines as bytes, without line terminators (a line cut by a broken stream is
    not yielded: `_StreamBroken` comes instead)."""
    pending = b""
    for chunk in _chunks(shard):
        parts = (pending + chunk).split(b"\n")
        pending = parts.pop()
        yield from parts
    if pending:
        yield pending


def _broken(shard: Shard, broken: _StreamBroken, line: int) -> InputError:
    """Where a stream broke, for the error (or, with on_error="skip", the exclusion log): the line
    it broke in, from 1 (lines before it were read whole), and how far it decompressed."""
    return InputError(
        shard.label,
        f"{broken.detail}, in line {line} (lines before it were read whole; "
        f"{broken.decompressed:,} bytes decompressed)",
    )


def _row_error(shard: Shard, options: ReadOptions, line: int, message: str) -> None:
    if options.on_error == "raise":
        raise InputError(shard.label, message, line=line)


def read_jsonl(shard: Shard, options: ReadOptions) -> Iterator[pa.Table]:
    builder = _BatchBuilder(shard, options)
    try:
        yield from _jsonl_batches(shard, options, builder)
    except _StreamBroken as broken:
        error = _broken(shard, broken, builder.line + 1)
    except InputError as input_error:
        error = input_error
    else:
        yield from builder.emit()
        return
    if options.on_error == "skip":
        yield from builder.emit()  # the rows read before the error are kept
    raise error


def _jsonl_batches(shard: Shard, options: ReadOptions, builder: _BatchBuilder) -> Iterator[pa.Table]:
    for number, line in enumerate(_lines(shard), 1):
        builder.line = number
        if not line.strip():
            continue
        raw, bad = decode_utf8(line)
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as error:
            what = error.msg.removesuffix(" at")  # json's own message, without its "line 1"
            _row_error(shard, options, number, f"invalid JSON: {what} at column {error.colno}")
            builder.add(raw, bad, reason="invalid_json")
        else:
            if not isinstance(record, dict):
                _row_error(shard, options, number, "JSON line is not an object")
                builder.add(raw, bad, reason="invalid_json")
            else:
                if options.text_column not in record:
                    raise InputError(
                        shard.label,
                        f"no field {options.text_column!r} (fields: {', '.join(map(str, record)) or 'none'})",
                        line=number,
                    )
                text = record.pop(options.text_column)
                record_id = record.pop(options.id_column, None)
                reason = None
                if text is not None and not isinstance(text, str):
                    _row_error(shard, options, number, f"text is {type(text).__name__}")
                    text, reason = json.dumps(text, ensure_ascii=False), "non_string_text"
                builder.add(text, bad, record_id, record, reason)
        if builder.full():
            yield from builder.emit()


def read_text(shard: Shard, options: ReadOptions) -> Iterator[pa.Table]:
    builder = _BatchBuilder(shard, options)
    try:
        if options.text_unit == "file":
            text, bad = decode_utf8(b"\n".join(_lines(shard)))
            builder.add(text, bad)
        else:
            for number, line in enumerate(_lines(shard), 1):
                builder.line = number
                line = line.rstrip(b"\r")
                if not line.strip():
                    continue
                text, bad = decode_utf8(line)
                builder.add(text, bad)
                if builder.full():
                    yield from builder.emit()
    except _StreamBroken as broken:
        if options.on_error == "skip":
            yield from builder.emit()  # the rows read before the break are kept
        raise _broken(shard, broken, builder.line + 1) from None
    yield from builder.emit()


def _decode_binary(values: pa.Array) -> tuple[pa.Array, pa.Array]:
    texts: list[str | None] = []
    bads: list[int] = []
    for raw in values.to_pylist():
        if raw is None:
            texts.append(None)
            bads.append(0)
        else:
            text, bad = decode_utf8(raw)
            texts.append(text)
            bads.append(bad)
    return pa.array(texts, pa.string()), pa.array(bads, pa.int64())


def parquet_columns(shard: Shard) -> list[str]:
    """The column names of a Parquet shard, from its footer (no row is read); [] when it cannot
    be opened (reading it reports that, with the shard's name)."""
    fs, path = filesystem(shard.uri)
    try:
        with fs.open_input_file(path) as source:
            return list(pq.ParquetFile(source).schema_arrow.names)
    except (OSError, pa.ArrowException):
        return []


def carried_columns(shard: Shard, options: ReadOptions) -> list[str]:
    """The columns a shard's rows carry into the run beside the reader's own (`id`, `text`,
    `parent_id`, `bad_bytes`), as far as planning can tell without reading a batch: a Parquet
    shard's footer, a JSONL shard's first record (one line read), none for text. Names dataclean
    owns come back as the reader renames them (`input_id`). [] when the shard cannot be read
    (reading it reports that, with the shard's name and row)."""
    if shard.format == "parquet":
        names = parquet_columns(shard)
    elif shard.format == "jsonl":
        names = _first_record_keys(shard)
    else:
        return []
    own = {options.text_column, options.id_column}
    return [_carried_name(name) for name in names if name not in own]


def _first_record_keys(shard: Shard) -> list[str]:
    try:
        for line in _lines(shard):
            if line.strip():
                record = json.loads(decode_utf8(line)[0])
                return [str(key) for key in record] if isinstance(record, dict) else []
    except (OSError, ValueError, _StreamBroken, pa.ArrowException):
        return []
    return []


def read_parquet(shard: Shard, options: ReadOptions) -> Iterator[pa.Table]:
    fs, path = filesystem(shard.uri)
    try:
        file = pq.ParquetFile(fs.open_input_file(path))
    except (OSError, pa.ArrowException) as error:
        raise InputError(shard.label, f"not a readable Parquet file: {error}") from None
    schema = file.schema_arrow
    if options.text_column not in schema.names:
        raise InputError(
            shard.label, f"no column {options.text_column!r} (columns: {', '.join(schema.names)})"
        )
    text_type = schema.field(options.text_column).type
    if not (
        pa.types.is_string(text_type)
        or pa.types.is_large_string(text_type)
        or pa.types.is_binary(text_type)
        or pa.types.is_large_binary(text_type)
    ):
        raise InputError(shard.label, f"column {options.text_column!r} is {text_type}, not text")
    row = 0
    try:
        batches = file.iter_batches(batch_size=options.batch_rows)
        for batch in batches:
            yield _contract_batch(shard, options, pa.Table.from_batches([batch]), row)
            row += batch.num_rows
    except (OSError, pa.ArrowException) as error:
        raise InputError(shard.label, f"cannot read (corrupt): {error}", row=row) from None


def _contract_batch(shard: Shard, options: ReadOptions, table: pa.Table, first_row: int) -> pa.Table:
    """Turn a batch of an Arrow input into the row contract (ids, text, bad_bytes, drop reason)."""
    text = table.column(options.text_column).combine_chunks()
    if pa.types.is_binary(text.type) or pa.types.is_large_binary(text.type):
        text, bad = _decode_binary(text)
    else:
        text = text.cast(pa.string())
        try:
            text.validate(full=True)
            bad = pa.array([0] * len(text), pa.int64())
        except pa.ArrowInvalid:  # invalid UTF-8 stored as a string column
            text, bad = _decode_binary(text.cast(pa.binary()))
    rows = range(first_row, first_row + table.num_rows)
    derived = [f"{shard.name}:{r}" for r in rows]
    if options.id_column in table.column_names:
        given = table.column(options.id_column).cast(pa.string()).to_pylist()
        ids = pa.array([g if g is not None else d for g, d in zip(given, derived, strict=True)], pa.string())
    else:
        ids = pa.array(derived, pa.string())
    reasons = (
        pa.array([None if t is not None else "null_text" for t in text.to_pylist()], pa.string())
        if text.null_count
        else pa.nulls(len(text), pa.string())
    )
    data = {C.ID: ids, C.TEXT: text, C.PARENT_ID: ids, C.BAD_BYTES: bad}
    for name in table.column_names:
        if name not in (options.text_column, options.id_column):
            data[_carried_name(name)] = table.column(name)
    data[C.DROP_REASON] = reasons
    return pa.table(data)


READERS = {"jsonl": read_jsonl, "text": read_text, "parquet": read_parquet}


def read_shard(shard: Shard, options: ReadOptions) -> Iterator[pa.Table]:
    """Stream a shard's rows as contract batches (see the module docstring)."""
    return READERS[shard.format](shard, options)
