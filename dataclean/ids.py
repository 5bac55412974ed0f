"""Stable hashes of sample texts, used to match quarantine entries when ids change.

`text_hash` is xxh3-128 of the UTF-8 text, as 32 hex digits: fast, stable across processes and
platforms (unlike Python's `hash`), and wide enough that collisions are negligible at corpus scale.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
import xxhash


def text_hash(text: str) -> str:
    """Hash of a sample's final text (the `text_hash` column)."""
    return xxhash.xxh3_128_hexdigest(text.encode("utf-8", "surrogatepass"))


def text_hashes(texts: pa.Array | pa.ChunkedArray | Iterable[str | None]) -> pa.Array:
    """`text_hash` of every text; null stays null."""
    values = texts.to_pylist() if isinstance(texts, (pa.Array, pa.ChunkedArray)) else texts
    return pa.array(
        [None if text is None else text_hash(text) for text in values], type=pa.string()
    )
