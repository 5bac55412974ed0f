"""Stable sample ids and text hashes.

An id comes from the input's id column when it has one, else from the shard's name (its path
relative to the input root) and the record's position in that file: `"{shard}:{row}"`. Neither
depends on worker count, executor, batch size or run order. A chunk of a split document is
`"{parent_id}#{k}"`.
"""

from __future__ import annotations

import pyarrow as pa
import xxhash


def derived_ids(shard_name: str, first_row: int, count: int) -> pa.Array:
    """Ids `"{shard_name}:{row}"` for rows `first_row .. first_row + count - 1` of a shard."""
    return pa.array([f"{shard_name}:{row}" for row in range(first_row, first_row + count)])


def text_hash(text: str) -> str:
    """Hash of a text (xxh3, 64 bits, hex): matches quarantine entries when ids change."""
    return xxhash.xxh3_64_hexdigest(text.encode("utf-8", "surrogatepass"))


def text_hashes(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """`text_hash` of every text in an Arrow string array (null stays null)."""
    return pa.array([None if t is None else text_hash(t) for t in texts.to_pylist()], type=pa.string())
