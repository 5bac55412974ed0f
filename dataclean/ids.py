"""Stable sample ids and text hashes.

An id comes from the input's id column when it has one, else from the shard's name (its path
relative to the input root) and the record's position in that file: `"{shard}:{row}"`. Neither
depends on worker count, executor, batch size or run order. A chunk of a split document is
`"{parent_id}#{k}"`.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from dataclean import columns as C


def text_hash(text: str) -> str:
    """Hash of a text (xxh3, 64 bits, hex): matches quarantine entries when ids change."""
    return xxhash.xxh3_64_hexdigest(text.encode("utf-8", "surrogatepass"))


def text_hashes(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """`text_hash` of every text in an Arrow string array (null stays null)."""
    return pa.array([None if t is None else text_hash(t) for t in texts.to_pylist()], type=pa.string())


def table_text_hashes(table: pa.Table) -> pa.Array | pa.ChunkedArray:
    """Each row's `text_hash`: the table's own where it has the column filled (a run's OUT/data),
    computed from `text` where it has none (or a null). The one place rows get their hash."""
    if C.TEXT_HASH not in table.column_names:
        return text_hashes(table.column(C.TEXT))
    given = table.column(C.TEXT_HASH)
    if given.null_count == 0:
        return given
    return pc.coalesce(given, text_hashes(table.column(C.TEXT)))
