"""An index of an earlier output, so corpora added later do not bring its duplicates back.

An index is a folder of dedup summaries (the same rows `observe` produces) of the rows an
earlier run kept, plus `index.json` with the settings they were computed with:

    build_index(stage, ["OUT/data/part-0.parquet", ...], "INDEX")      # once per output
    DropDuplicates(index="INDEX")                                       # later runs

`fit` numbers the index rows before this run's rows and gives them the highest keep priority:
an index row is never dropped (it is not in this run) and always wins its cluster, so a new
row that duplicates earlier data is dropped as `exact_of:<earlier id>` or
`near_duplicate_of:<earlier id>`. Adding the kept rows of the new run to the same folder
(`build_index` again) extends the index. Summaries must be comparable: an index built with other
shingle, permutation, band or fold settings is refused with the fields that differ.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from dataclean import columns as C
from dataclean.dedup.summary import SUMMARY_SCHEMA, Sketch
from dataclean.errors import ConfigError

if TYPE_CHECKING:
    from dataclean.stages.dedup import DropDuplicates

META = "index.json"
FORMAT = 1


def _meta_path(folder: str) -> str:
    return os.path.join(folder, META)


def _read_meta(folder: str) -> dict[str, object]:
    path = _meta_path(folder)
    if not os.path.exists(path):
        raise ConfigError(f"dedup.index: {folder!r} is not a dedup index (no {META})")
    with open(path, encoding="utf-8") as handle:
        meta: dict[str, object] = json.load(handle)
    return meta


def _check(meta: dict[str, object], sketch: Sketch, folder: str) -> None:
    expected = sketch.compatible()
    stored = meta.get("sketch", {})
    if not isinstance(stored, dict):
        stored = {}
    differ = sorted(name for name in expected if stored.get(name) != expected[name])
    if differ:
        details = ", ".join(f"{name}={stored.get(name)!r} (now {expected[name]!r})" for name in differ)
        raise ConfigError(f"dedup.index: {folder!r} was built with other settings: {details}")


def index_summaries(folder: str, sketch: Sketch) -> list[str]:
    """The summary files of an index, after checking it was built with compatible settings."""
    _check(_read_meta(folder), sketch, folder)
    return sorted(glob.glob(os.path.join(folder, "summaries", "*.parquet")))


def build_index(
    stage: DropDuplicates, files: Sequence[str], folder: str, batch_rows: int = 65536
) -> list[str]:
    """Add the rows of Parquet `files` (an output's kept rows) to the index in `folder`.

    Creates the index if needed. Reads `batch_rows` rows at a time; returns the files written.
    """
    sketch = replace(stage.sketch(), keep="first")  # index rows always win; no keep column needed
    summaries_folder = os.path.join(folder, "summaries")
    if os.path.exists(_meta_path(folder)):
        _check(_read_meta(folder), sketch, folder)
    else:
        os.makedirs(summaries_folder, exist_ok=True)
        with open(_meta_path(folder) + ".tmp", "w", encoding="utf-8") as handle:
            json.dump({"format": FORMAT, "sketch": sketch.compatible()}, handle, indent=1)
        os.replace(_meta_path(folder) + ".tmp", _meta_path(folder))
    number = len(glob.glob(os.path.join(summaries_folder, "*.parquet")))
    written = []
    for source in files:
        parquet = pq.ParquetFile(source)
        columns = [name for name in (C.ID, C.TEXT, C.LANG) if name in parquet.schema_arrow.names]
        if C.ID not in columns or C.TEXT not in columns:
            raise ConfigError(f"dedup.index: {source!r} has no {C.ID!r} and {C.TEXT!r} columns")
        path = os.path.join(summaries_folder, f"{number:06d}.parquet")
        with pq.ParquetWriter(path + ".tmp", SUMMARY_SCHEMA) as writer:
            for batch in parquet.iter_batches(batch_size=batch_rows, columns=columns):
                writer.write_table(sketch.summarize(pa.Table.from_batches([batch])))
        os.replace(path + ".tmp", path)
        written.append(path)
        number += 1
    return written
