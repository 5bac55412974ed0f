"""Read a run's output folder for the report, never holding more than one row group of it.

`load_output` reads `stats.json` and `manifest.json`; `tables` streams the Parquet files of
`data/`, `excluded/` or `quarantined/` row group by row group with only the columns asked for
(files written with other columns simply lack them), so a report over a terabyte output reads its
ids, reasons and scores, not its text. `id_hashes` turns ids into 64-bit integers for set
operations and id-hash sampling (any sampling hashes the id, see docs/measurements.md).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dataclean.dedup.hashing import xxh64_strings
from dataclean.errors import OutputError
from dataclean.io.layout import FOLDERS, MANIFEST, STATS
from dataclean.io.shards import filesystem
from dataclean.io.writers import exists, parquet_files, read_json


@dataclass
class Output:
    """A finished run's folder: its stats, its manifest and its Parquet files per folder."""

    root: str
    stats: dict[str, Any]
    manifest: dict[str, Any]
    files: dict[str, list[str]] = field(default_factory=dict)

    def columns(self, folder: str) -> set[str]:
        """Every column name present in at least one file of `folder`."""
        names: set[str] = set()
        for path in self.files.get(folder, []):
            names.update(_schema(path).names)
        return names

    def stage_params(self, stage: str | None) -> dict[str, Any]:
        """The manifest's parameters of `stage` ({} when the run did not have that stage)."""
        for entry in self.manifest.get("config", {}).get("stages", []):
            if isinstance(entry, dict) and entry.get("stage") == stage:
                return dict(entry.get("params") or {})
        return {}

    def stage_stats(self, stage: str | None) -> dict[str, Any]:
        """The stats of `stage` ({} when the run did not have that stage)."""
        found = (row for row in self.stats.get("stages", []) if row.get("stage") == stage)
        return dict(next(found, {}))

    def producer(self, column: str) -> str | None:
        """The name of the stage that provided `column` in this run, by what the stages declared
        (the manifest's `declared`): the report finds a section's stage by its columns, whatever
        a recipe calls it. None when no stage did."""
        for entry in self.manifest.get("declared", []):
            if column in entry.get("provides", []):
                return str(entry["stage"])
        return None

    def row_adder(self) -> str | None:
        """The name of the stage that adds rows (splits documents), by its declaration."""
        return next((str(e["stage"]) for e in self.manifest.get("declared", []) if e.get("adds_rows")), None)


def load_output(root: str) -> Output:
    """Open a run's output folder; an `OutputError` when it holds no finished run."""
    root = root.rstrip("/")
    stats_path = posixpath.join(root, STATS)
    if not exists(stats_path):
        raise OutputError(f"{root} has no {STATS}: not the output folder of a finished dataclean run")
    manifest_path = posixpath.join(root, MANIFEST)
    manifest = read_json(manifest_path) if exists(manifest_path) else {}
    files = {folder: parquet_files(posixpath.join(root, folder)) for folder in FOLDERS}
    return Output(root, dict(read_json(stats_path)), dict(manifest), files)


def _schema(path: str) -> pa.Schema:
    fs, local = filesystem(path)
    with fs.open_input_file(local) as source:
        return pq.ParquetFile(source).schema_arrow


def tables(
    files: Sequence[str], columns: Sequence[str], row_groups: dict[str, list[int]] | None = None
) -> Iterator[pa.Table]:
    """Each row group of `files` (or only those in `row_groups[path]`), reduced to `columns`.

    A file lacking some of the columns yields the ones it has; one lacking all is skipped.
    """
    for path in files:
        fs, local = filesystem(path)
        with fs.open_input_file(local) as source:
            parquet = pq.ParquetFile(source)
            present = [name for name in columns if name in parquet.schema_arrow.names]
            if not present:
                continue
            groups = row_groups.get(path, []) if row_groups is not None else range(parquet.num_row_groups)
            for group in groups:
                yield parquet.read_row_group(group, columns=present)


def sample_row_groups(files: Sequence[str], max_rows: int) -> tuple[dict[str, list[int]], int, int]:
    """Row groups spread evenly over `files`, about `max_rows` rows in all.

    Returns ({path: row group indexes}, rows chosen, rows in all files). Every row group is
    chosen when the files hold at most `max_rows` rows.
    """
    groups: list[tuple[str, int, int]] = []
    for path in files:
        fs, local = filesystem(path)
        with fs.open_input_file(local) as source:
            metadata = pq.ParquetFile(source).metadata
            groups.extend((path, g, metadata.row_group(g).num_rows) for g in range(metadata.num_row_groups))
    total = sum(rows for _, _, rows in groups)
    stride = max(1, -(-total // max(max_rows, 1))) if total > max_rows else 1
    chosen: dict[str, list[int]] = {}
    rows_chosen = 0
    for number, (path, group, rows) in enumerate(groups):
        if number % stride == 0:
            chosen.setdefault(path, []).append(group)
            rows_chosen += rows
    return chosen, rows_chosen, total


def id_hashes(ids: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """XXH64 of each id's UTF-8 bytes as uint64 (a null id hashes like the empty string), over
    the Arrow buffers (`dataclean.dedup.hashing`): no `bytes` object per id."""
    if len(ids) == 0:
        return np.zeros(0, dtype=np.uint64)
    return xxh64_strings(ids.cast(pa.large_string()))


def reason_kinds(reasons: pa.Array | pa.ChunkedArray) -> pa.Array:
    """`stage:kind` of each reason (`dedup:exact_of:abc` -> `dedup:exact_of`), as runner stats count."""
    found = pc.extract_regex(pc.fill_null(reasons, ""), r"^(?P<kind>[^:]*(?::[^:]*)?)")
    return pc.struct_field(found, "kind")
