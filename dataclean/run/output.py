"""The output folder of a run: checked before anything runs, resumed or refused, and cleared.

Each (group, shard) task leaves a done marker with its stats, so a rerun with the same config does
only what is missing, and a rerun with another config refuses (naming the changed settings)
unless told to overwrite. The folder's layout is `dataclean.io.layout` (docs/contracts.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dataclean import columns as C
from dataclean.errors import OutputError
from dataclean.io import hf
from dataclean.io.files import atomic_output, read_parquet
from dataclean.io.layout import MANIFEST, OUTPUT_ENTRIES, Layout
from dataclean.io.shards import Shard, discover, filesystem
from dataclean.io.writers import exists, parquet_files, read_json
from dataclean.run.config import config_hash
from dataclean.stage import Stage


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        flat: dict[str, Any] = {}
        for key, inner in value.items():
            flat.update(_flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    if isinstance(value, list) and value and all(isinstance(v, dict) and "stage" in v for v in value):
        return _flatten({v["stage"]: v.get("params", v) for v in value}, prefix)
    return {prefix: value}


def _changed(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    before, after = _flatten(old), _flatten(new)
    keys = sorted(set(before) | set(after))
    return [
        f"{k}: {before.get(k, '(none)')!r} -> {after.get(k, '(none)')!r}"
        for k in keys
        if before.get(k) != after.get(k)
    ]


def check_paths(inputs: Sequence[Any], output: str, overwrite: bool = False) -> None:
    """What a run can check of its paths before it loads a stage or starts an executor, each
    failure one line: every input path exists and is in a format it reads (`discover`; Hugging
    Face inputs are checked when they load), and the output is a folder, new or a dataclean
    output (`--overwrite` replaces any). `run_pipeline` checks the same again, with the config."""
    paths = [item for item in inputs if isinstance(item, str) and not _is_dataset(item)]
    if paths:
        discover(paths)
    layout = Layout(output.rstrip("/"))
    _check_output_kind(layout)
    if not overwrite and not exists(layout.manifest) and _has_entries(layout):
        raise OutputError(f"{layout.root} exists and is not a dataclean output; use --overwrite")


def _is_dataset(item: str) -> bool:
    return item.startswith(hf.HF_PREFIX) or hf.is_saved_dataset(item)


def _check_output_kind(layout: Layout) -> None:
    fs, path = filesystem(layout.root)
    if fs.get_file_info(path).is_file:
        raise OutputError(f"{layout.root} is a file: the output (-o) is a folder, new or from an earlier run")


def _has_entries(layout: Layout) -> bool:
    from pyarrow.fs import FileSelector

    fs, path = filesystem(layout.root)
    return bool(fs.get_file_info(FileSelector(path, allow_not_found=True)))


def prepare_output(layout: Layout, config: dict[str, Any], overwrite: bool) -> dict[str, Any] | None:
    """Check OUT/ against the config: returns the earlier manifest when resuming, else None."""
    _check_output_kind(layout)
    manifest_path = layout.manifest
    if exists(manifest_path):
        manifest = read_json(manifest_path)
        if overwrite:
            clear_output(layout)
            return None
        if manifest.get("config_hash") == config_hash(config):
            return dict(manifest)
        changes = _changed(manifest.get("config", {}), config)
        raise OutputError(
            f"{layout.root} holds a run with another config ({'; '.join(changes[:5]) or 'changed'}); "
            "use --overwrite to replace it or choose another output folder"
        )
    if _has_entries(layout):
        if not overwrite:
            raise OutputError(f"{layout.root} exists and is not a dataclean output; use --overwrite")
        clear_output(layout)
    return None


def clear_output(layout: Layout) -> None:
    """Remove what a run writes under OUT/ (nothing else)."""
    fs, path = filesystem(layout.root)
    for entry in (*OUTPUT_ENTRIES, MANIFEST):
        target = f"{path}/{entry}"
        info = fs.get_file_info(target)
        if info.is_file:
            fs.delete_file(target)
        elif info.type.name == "Directory":
            fs.delete_dir(target)


def task_done(layout: Layout, group: int, shard: Shard) -> dict[str, Any] | None:
    marker = layout.done_marker(group, shard.index)
    if not exists(marker):
        return None
    stats = read_json(marker)
    if stats.get("shard_size") != shard.size or stats.get("shard_mtime") != shard.mtime:
        return None  # the input changed since: do it again
    return dict(stats)


def resolve_inputs(inputs: Sequence[Any], layout: Layout) -> list[str]:
    """Paths to read: Hugging Face datasets (objects, `hf:` specs, saved folders) become Parquet."""
    resolved: list[str] = []
    for number, item in enumerate(inputs):
        if isinstance(item, str) and not _is_dataset(item):
            resolved.append(item)
            continue
        dataset = hf.load(item) if isinstance(item, str) else item
        name = f"input{number}"
        resolved.extend(hf.export(dataset, f"{layout.work}/inputs", name))
    return resolved


def same_inputs(old: dict[str, Any], new: dict[str, Any]) -> bool:
    return bool(old.get("inputs") == new.get("inputs"))


def merge_records(layout: Layout, stage: Stage) -> None:
    """OUT/{its records file}: the records its workers wrote (`with_records`), shard by shard,
    one row group per part, so memory holds one part at a time; an empty file when none."""
    records = stage.outputs.records
    assert records is not None
    schema = pa.schema([pa.field(C.ID, pa.string()), *records.schema])
    with (
        atomic_output(f"{layout.root}/{records.file}") as sink,
        pq.ParquetWriter(sink, schema) as writer,
    ):
        for path in parquet_files(layout.records(stage.name)):
            writer.write_table(read_parquet(path).cast(schema))
