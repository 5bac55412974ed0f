"""Read the cleaned corpus a training run's sample ids come from (a dataclean output folder).

The guard and `dataclean supervise` read it for the text and text hash of a blamed sample; the
offline analysis for excerpts and the columns kinds of samples are grouped by.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds

from dataclean import columns as C
from dataclean.errors import InputError
from dataclean.ids import table_text_hashes
from dataclean.io.layout import DATA


def corpus_files(path: str | Path) -> list[str]:
    """Parquet files of a cleaned corpus: OUT/data/ of a dataclean output, or a file or folder."""
    root = Path(path)
    if (root / DATA).is_dir():
        root = root / DATA
    if root.is_file():
        return [str(root)]
    files = sorted(str(p) for p in root.rglob("*.parquet") if not p.name.startswith("."))
    if not files:
        raise InputError(str(path), "no Parquet files in the corpus folder")
    return files


def read_corpus_rows(path: str | Path, ids: list[str]) -> tuple[pa.Table, int]:
    """(id, text, text_hash) of the given ids in the corpus, and the corpus's row count."""
    dataset = ds.dataset(corpus_files(path), format="parquet")
    names = dataset.schema.names
    if C.ID not in names or C.TEXT not in names:
        raise InputError(str(path), f"corpus needs columns {C.ID!r} and {C.TEXT!r}")
    columns = [C.ID, C.TEXT] + ([C.TEXT_HASH] if C.TEXT_HASH in names else [])
    rows = dataset.to_table(columns=columns, filter=ds.field(C.ID).isin(ids))
    if C.TEXT_HASH not in names:
        rows = rows.append_column(C.TEXT_HASH, table_text_hashes(rows))
    return rows, dataset.count_rows()
