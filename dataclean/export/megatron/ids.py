"""`PREFIX.ids.parquet`: which dataclean sample each document of a Megatron prefix is.

One row per document of the IndexedDataset, in document order:

| column | type | meaning |
|---|---|---|
| `document` | int64 | the document's index in the prefix (Megatron's document/sequence index) |
| `id` | string | the sample's dataclean `id` |
| `text_hash` | string | its `text_hash` (matches a quarantine list when ids change) |
| `weight` | float64 | its `weight` (a record: Megatron samples documents uniformly) |
| `tokens` | int64 | its token count, end-of-document included |

The file's key-value metadata (`dataclean.megatron`) holds the sha256 of the `.idx` it describes,
so a reader can tell when the pair no longer belongs together, and the tokenizer's description.
An ids file for a prefix that `tools/preprocess_data.py` wrote can be made by the user with the
same columns (`document` and `id` are required); without the digest its row count is checked.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dataclean import columns as C
from dataclean.errors import InputError
from dataclean.io.files import atomic_output, open_input

DOCUMENT = "document"
TOKEN_COUNT = "tokens"
IDS_SCHEMA = pa.schema(
    [
        (DOCUMENT, pa.int64()),
        (C.ID, pa.string()),
        (C.TEXT_HASH, pa.string()),
        (C.WEIGHT, pa.float64()),
        (TOKEN_COUNT, pa.int64()),
    ]
)
METADATA_KEY = b"dataclean.megatron"


def ids_path(prefix: str) -> str:
    return prefix + ".ids.parquet"


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_ids(path: str, table: pa.Table, metadata: dict[str, Any] | None = None) -> None:
    """Write an ids table (IDS_SCHEMA) atomically, with dataclean's metadata (sorted keys, so the
    bytes depend only on the content)."""
    table = table.select(IDS_SCHEMA.names).cast(IDS_SCHEMA)
    if metadata is not None:
        table = table.replace_schema_metadata({METADATA_KEY: json.dumps(metadata, sort_keys=True).encode()})
    with atomic_output(path) as sink:
        pq.write_table(table, sink, compression="zstd")


def read_ids(path: str, documents: int | None = None, idx_digest: str | None = None) -> pa.Table:
    """An ids file, checked against the prefix it belongs to: `documents` rows numbered 0..n-1,
    and the `.idx` digest when the file records one."""
    try:
        with open_input(path) as source:
            table = pq.read_table(source)
    except (OSError, FileNotFoundError) as error:
        raise InputError(path, f"cannot read the ids file: {error}") from error
    for name in (DOCUMENT, C.ID):
        if name not in table.column_names:
            raise InputError(path, f"no {name!r} column: not an ids file of `dataclean export megatron`")
    table = table.sort_by(DOCUMENT)
    numbers = table.column(DOCUMENT).to_numpy()
    if documents is not None and (
        len(numbers) != documents or not np.array_equal(numbers, np.arange(documents))
    ):
        raise InputError(path, f"has {len(numbers):,} documents, the prefix {documents:,}: not its ids file")
    recorded = ids_metadata(table).get("idx_sha256")
    if idx_digest is not None and recorded is not None and recorded != idx_digest:
        raise InputError(path, "was written for another .idx (its digest differs): the prefix changed since")
    return table


def ids_metadata(table: pa.Table) -> dict[str, Any]:
    """dataclean's metadata of an ids table ({} for a file made elsewhere)."""
    raw = (table.schema.metadata or {}).get(METADATA_KEY)
    return dict(json.loads(raw)) if raw else {}
