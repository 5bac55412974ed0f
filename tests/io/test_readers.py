"""Readers: formats, compression, invalid UTF-8, ids, and bad rows/shards."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from dataclean import columns as C
from dataclean.errors import InputError
from dataclean.io.decode import decode_utf8
from dataclean.io.readers import ReadOptions, read_shard
from dataclean.io.shards import discover


def _read(path: Path, **options: object) -> pa.Table:
    shards = discover([str(path)])
    tables = [t for s in shards for t in read_shard(s, ReadOptions(**options))]  # type: ignore[arg-type]
    return pa.concat_tables(tables)


def test_decode_removes_and_counts_only_the_bad_bytes() -> None:
    assert decode_utf8("héllo".encode()) == ("héllo", 0)
    assert decode_utf8(b"ab\xffcd\xc3\xa9\xe4\xb8") == ("abcdé", 3)


def test_jsonl_with_invalid_bytes_keeps_the_rest_of_the_document(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"text": "good \xff\xfe text \xe4\xb8\xad\xe6\x96\x87"}\n{"text": "next"}\n')
    table = _read(path)
    assert table.column(C.TEXT).to_pylist() == ["good  text 中文", "next"]
    assert table.column(C.BAD_BYTES).to_pylist() == [2, 0]


def test_text_file_with_invalid_bytes_per_line_and_per_file(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_bytes(b"line one \x80\n\n  \nline two\r\n")
    lines = _read(path)
    assert lines.column(C.TEXT).to_pylist() == ["line one ", "line two"]
    assert lines.column(C.BAD_BYTES).to_pylist() == [1, 0]
    assert lines.column(C.ID).to_pylist() == ["a.txt:0", "a.txt:1"]
    whole = _read(path, text_unit="file")
    assert whole.num_rows == 1 and whole.column(C.BAD_BYTES).to_pylist() == [1]


def test_parquet_binary_text_column_is_decoded(tmp_path: Path) -> None:
    path = tmp_path / "b.parquet"
    pq.write_table(pa.table({"text": pa.array([b"ok", b"bad\xff"], pa.binary())}), path)
    table = _read(path)
    assert table.column(C.TEXT).to_pylist() == ["ok", "bad"]
    assert table.column(C.BAD_BYTES).to_pylist() == [0, 1]


@pytest.mark.parametrize("suffix", [".jsonl.gz", ".jsonl.zst", ".jsonl"])
def test_compressed_jsonl(tmp_path: Path, suffix: str) -> None:
    raw = "".join(json.dumps({"text": f"doc {i}", "n": i}) + "\n" for i in range(5)).encode()
    path = tmp_path / f"c{suffix}"
    if suffix.endswith(".gz"):
        raw = gzip.compress(raw)
    elif suffix.endswith(".zst"):
        raw = zstandard.ZstdCompressor().compress(raw)
    path.write_bytes(raw)
    table = _read(path)
    assert table.column(C.TEXT).to_pylist() == [f"doc {i}" for i in range(5)]
    assert table.column("n").to_pylist() == list(range(5))


def test_ids_from_id_column_else_from_shard_name_and_row(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / "d.jsonl"
    path.write_text('{"id": 7, "text": "a"}\n{"text": "b"}\n')
    table = _read(tmp_path)
    assert table.column(C.ID).to_pylist() == ["7", "sub/d.jsonl:1"]
    assert table.column(C.PARENT_ID).to_pylist() == table.column(C.ID).to_pylist()


def test_custom_text_and_id_columns_and_owned_names_kept_aside(tmp_path: Path) -> None:
    path = tmp_path / "e.jsonl"
    path.write_text('{"doc": "x1", "content": "hello", "text": "other field"}\n')
    table = _read(path, text_column="content", id_column="doc")
    assert table.column(C.ID).to_pylist() == ["x1"]
    assert table.column(C.TEXT).to_pylist() == ["hello"]
    assert table.column("input_text").to_pylist() == ["other field"]


def test_null_text_is_marked_not_lost(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_text('{"text": null}\n{"text": "x"}\n')
    assert _read(path).column(C.DROP_REASON).to_pylist() == ["null_text", None]


def test_bad_rows_raise_with_file_and_row_or_are_marked(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    path.write_text('{"text": "ok"}\nnot json\n{"text": 5}\n')
    with pytest.raises(InputError, match=r"g\.jsonl, line 2: invalid JSON: Expecting value at column 1$"):
        _read(path)
    table = _read(path, on_error="skip")
    assert table.column(C.DROP_REASON).to_pylist() == [None, "invalid_json", "non_string_text"]


def test_missing_text_column_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "h.parquet"
    pq.write_table(pa.table({"body": ["x"]}), path)
    with pytest.raises(InputError, match=r"h\.parquet: no column 'text' \(columns: body\)"):
        _read(path)
    path2 = tmp_path / "i.parquet"
    pq.write_table(pa.table({"text": [1, 2]}), path2)
    with pytest.raises(InputError, match="not text"):
        _read(path2)


def test_discover_rejects_unknown_and_missing_inputs(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        discover([str(tmp_path / "missing.jsonl")])
    odd = tmp_path / "x.csv"
    odd.write_text("a,b\n")
    with pytest.raises(InputError, match="unknown format"):
        discover([str(odd)])
    with pytest.raises(InputError, match="no file matches"):
        discover([str(tmp_path / "*.parquet")])


def test_corrupt_shards_raise_input_errors(tmp_path: Path) -> None:
    fake = tmp_path / "fake.parquet"
    fake.write_bytes(b"this is not parquet at all")
    with pytest.raises(InputError, match="not a readable Parquet file"):
        _read(fake)
    truncated = tmp_path / "t.jsonl.gz"
    rows = "".join(json.dumps({"text": f"row {i} {i * i}"}) + "\n" for i in range(5000))
    truncated.write_bytes(gzip.compress(rows.encode())[:-100])
    with pytest.raises(InputError, match="truncated"):
        _read(truncated)


@pytest.mark.parametrize("suffix", [".jsonl.gz", ".jsonl.zst", ".txt.gz"])
def test_a_stream_broken_midway_keeps_the_rows_before_it_and_says_where(tmp_path: Path, suffix: str) -> None:
    texts = [f"row {i} {i * i} " + "x" * (i % 37) for i in range(20_000)]
    lines = texts if suffix.startswith(".txt") else [json.dumps({"text": t}) for t in texts]
    data = "".join(line + "\n" for line in lines).encode()
    packed = gzip.compress(data) if suffix.endswith(".gz") else zstandard.ZstdCompressor().compress(data)
    path = tmp_path / f"cut{suffix}"
    path.write_bytes(packed[: len(packed) // 2])
    # Reference: what the codec's own streaming decoder gives for those bytes, cut to whole lines.
    gz = suffix.endswith(".gz")
    codec = zlib.decompressobj(wbits=31) if gz else zstandard.ZstdDecompressor().decompressobj()
    whole = codec.decompress(path.read_bytes()).count(b"\n")
    assert 0 < whole < len(texts)
    broken = rf"truncated: .* in line {whole + 1} \(lines before it were read whole"
    with pytest.raises(InputError, match=broken):
        _read(path)  # on_error="raise": nothing is yielded, the error says where
    shard = discover([str(path)])[0]
    batches = read_shard(shard, ReadOptions(on_error="skip", batch_rows=1000))
    got: list[str] = []
    with pytest.raises(InputError, match=f"in line {whole + 1} "):
        for batch in batches:
            got.extend(batch.column(C.TEXT).to_pylist())
    assert got == texts[:whole]  # every row before the break, none after, none cut


def test_multi_member_gzip_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"text": "a"}\n') + gzip.compress(b'{"text": "b"}\n'))
    assert _read(path).column(C.TEXT).to_pylist() == ["a", "b"]


def test_batches_are_bounded(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_text("".join(json.dumps({"text": f"t{i}"}) + "\n" for i in range(25)))
    shard = discover([str(path)])[0]
    sizes = [t.num_rows for t in read_shard(shard, ReadOptions(batch_rows=10))]
    assert sizes == [10, 10, 5]


def test_places_are_lines_from_1_for_line_formats_and_rows_from_0_for_tables(tmp_path: Path) -> None:
    """An editor's line number for JSONL and text (blank lines count), a row index that says it
    counts from 0 for Parquet."""
    path = tmp_path / "h.jsonl"
    path.write_text('{"text": "ok"}\n\n{"text": "fine"}\n{"text": [1]}\n')
    with pytest.raises(InputError, match=r"h\.jsonl, line 4: text is list$"):
        _read(path)
    assert str(InputError("t.parquet", "cannot read (corrupt)", row=2048)) == (
        "t.parquet, row 2048 (from 0): cannot read (corrupt)"
    )
