"""An index of an earlier output, so corpora added later do not bring its duplicates back.

An index is a folder of dedup summaries (the same rows `observe` produces) of the rows an
earlier run kept, plus `index.json` with the settings they were computed with:

    build_index(stage, ["OUT/data/part-0.parquet", ...], "INDEX")      # once per output
    DropDuplicates(index="INDEX")                                       # later runs

Outputs hold samples, and dedup compares documents (it runs before `split`): the chunks of a
split document (`id = "{parent_id}#{k}"`) are joined back in k order, which gives the document's
text exactly (see `dataclean.stages.split`), under its `parent_id`. A document whose chunks were
partly dropped by later stages comes back partial: it still matches near copies, not exact ones.

`fit` numbers the index rows before this run's rows and gives them the highest keep priority:
an index row is never dropped (it is not in this run) and always wins its cluster, so a new
row that duplicates earlier data is dropped as `exact_of:<earlier id>` or
`near_duplicate_of:<earlier id>`. Adding the kept rows of the new run to the same folder
(`build_index` again) extends the index. Summaries must be comparable: an index built with other
shingle, permutation, band or fold settings is refused with the fields that differ.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from dataclean import columns as C
from dataclean.dedup.summary import SUMMARY_SCHEMA, Sketch
from dataclean.errors import ConfigError
from dataclean.io.files import atomic_output, list_files, make_dirs, open_input, read_parquet
from dataclean.io.writers import exists, read_json, write_json


class Sketched(Protocol):
    """What `build_index` needs of a dedup configuration: its `Sketch`. The `DropDuplicates`
    stage is one; this module does not import the stage (the machinery sits below its wrapper)."""

    def sketch(self) -> Sketch: ...


META = "index.json"
FORMAT = 1


def _meta_path(folder: str) -> str:
    return posixpath.join(folder, META)


def _read_meta(folder: str) -> dict[str, object]:
    path = _meta_path(folder)
    if not exists(path):
        raise ConfigError(f"dedup.index: {folder!r} is not a dedup index (no {META})")
    meta: dict[str, object] = read_json(path)
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
    return list_files(posixpath.join(folder, "summaries"), ".parquet")


def build_index(stage: Sketched, files: Sequence[str], folder: str, batch_rows: int = 65536) -> list[str]:
    """Add the rows of Parquet `files` (an output's kept rows) to the index in `folder`.

    Creates the index if needed. Reads `batch_rows` rows at a time; returns the files written.
    """
    sketch = replace(stage.sketch(), keep="first")  # index rows always win; no keep column needed
    summaries_folder = posixpath.join(folder, "summaries")
    if exists(_meta_path(folder)):
        _check(_read_meta(folder), sketch, folder)
    else:
        make_dirs(summaries_folder)
        write_json(_meta_path(folder), {"format": FORMAT, "sketch": sketch.compatible()})
    number = len(list_files(summaries_folder, ".parquet"))
    written = []
    for source in files:
        with open_input(source) as handle:
            names = pq.ParquetFile(handle).schema_arrow.names
        columns = [name for name in (C.ID, C.TEXT, C.LANG, C.PARENT_ID) if name in names]
        if C.ID not in columns or C.TEXT not in columns:
            raise ConfigError(f"dedup.index: {source!r} has no {C.ID!r} and {C.TEXT!r} columns")
        # A split document's chunks are all in the file its shard wrote, so one file at a time.
        table = documents(read_parquet(source, columns=columns))
        path = posixpath.join(summaries_folder, f"{number:06d}.parquet")
        with atomic_output(path) as sink, pq.ParquetWriter(sink, SUMMARY_SCHEMA) as writer:
            for start in range(0, table.num_rows, batch_rows):
                writer.write_table(sketch.summarize(table.slice(start, batch_rows)))
        written.append(path)
        number += 1
    return written


def documents(table: pa.Table) -> pa.Table:
    """Join the chunks of split documents back (id = parent_id, texts in chunk order)."""
    if C.PARENT_ID not in table.column_names:
        return table
    ids = table.column(C.ID).to_pylist()
    parents = table.column(C.PARENT_ID).to_pylist()
    texts = table.column(C.TEXT).to_pylist()
    langs = table.column(C.LANG).to_pylist() if C.LANG in table.column_names else [None] * len(ids)
    chunks: dict[str, list[tuple[int, str, str | None]]] = {}
    for row_id, parent, text, lang in zip(ids, parents, texts, langs, strict=True):
        parent = parent or row_id
        suffix = row_id[len(parent) + 1 :] if row_id.startswith(parent + "#") else ""
        position = int(suffix) if suffix.isdigit() else 0
        chunks.setdefault(parent, []).append((position, text or "", lang))
    joined = {parent: sorted(parts, key=lambda part: part[0]) for parent, parts in chunks.items()}
    return pa.table(
        {
            C.ID: list(joined),
            C.TEXT: ["".join(part[1] for part in parts) for parts in joined.values()],
            C.LANG: [parts[0][2] for parts in joined.values()],
        }
    )
