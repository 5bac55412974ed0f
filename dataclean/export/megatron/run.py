"""`dataclean export megatron`: a run's kept rows -> Megatron-LM IndexedDataset prefixes with ids.

One map on the executor (`shards.ExportShard`: a small IndexedDataset per input file, in a work
folder `PREFIX.work/`), then, on the driver, either a merge into one prefix (the shards' `.bin`
files concatenated in input order, one `.idx` over all documents, the ids renumbered) or, with
`per_shard`, each shard moved to `PREFIX_NNNNN`. `PREFIX.json` lists the prefixes with their
document and token counts (and a `--data-path` for Megatron that blends them by tokens) and is
written last: an export is complete when it exists.

Documents follow the input files' name order and their rows' order, so every output byte is the
same on any executor and worker count. An interrupted export resumes: the work folder keeps the
finished shards (each marked by its `.done.json`) and a config hash; a rerun with the same inputs,
tokenizer, list and layout redoes only the rest, a rerun with others refuses unless `overwrite`.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from typing import Any

import numpy as np
import pyarrow as pa

from dataclean import __version__
from dataclean.errors import ConfigError
from dataclean.export.megatron.ids import DOCUMENT, digest, ids_path, read_ids, write_ids
from dataclean.export.megatron.indexed import bin_path, idx_path, optimal_dtype, read_index, write_index
from dataclean.export.megatron.shards import ExportShard, ShardResult, done_path, shard_summary
from dataclean.export.progress import ExportProgress, Silent
from dataclean.export.source import Listed, input_files
from dataclean.export.tokenizer import PackTokenizer
from dataclean.io.files import atomic_output, exists, make_dirs, open_input, remove_tree
from dataclean.io.shards import filesystem
from dataclean.io.writers import read_json, write_json

FORMAT_VERSION = 1
COPY_BYTES = 16 << 20


def manifest_path(prefix: str) -> str:
    return prefix + ".json"


def work_folder(prefix: str) -> str:
    return prefix + ".work"


def shard_prefix(prefix: str, index: int) -> str:
    """A shard's final name with `per_shard` (as preprocess_data.py names its partitions)."""
    return f"{prefix}_{index:05d}"


def _file_digest(path: str) -> str:
    with open_input(path) as source:
        return hashlib.sha256(source.read()).hexdigest()


def _config(
    sources: list[str], tokenizer: PackTokenizer, quarantine: str | None, per_shard: bool
) -> dict[str, Any]:
    sizes = []
    for source in sources:
        fs, path = filesystem(source)
        sizes.append([source, fs.get_file_info(path).size])
    return {
        "format_version": FORMAT_VERSION,
        "inputs": sizes,
        "tokenizer": tokenizer.describe(),
        "quarantine_sha256": _file_digest(quarantine) if quarantine else None,
        "per_shard": per_shard,
    }


def _hash(config: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]


def export_megatron(
    run_folder: str,
    prefix: str,
    tokenizer: PackTokenizer,
    executor: Any,
    quarantine: str | None = None,
    per_shard: bool = False,
    overwrite: bool = False,
    progress: ExportProgress | None = None,
) -> dict[str, Any]:
    """Export `run_folder`'s kept rows to `prefix`; returns what PREFIX.json holds."""
    progress = progress if progress is not None else Silent()
    if prefix.endswith("/") or not posixpath.basename(prefix):
        raise ConfigError(f"-o: {prefix!r} is a folder; give a prefix such as {prefix.rstrip('/')}/corpus")
    sources = input_files(run_folder)
    config = _config(sources, tokenizer, quarantine, per_shard)
    config_hash = _hash(config)
    manifest, work = manifest_path(prefix), work_folder(prefix)
    if exists(manifest) and not overwrite:
        previous = read_json(manifest)
        if previous.get("config_hash") == config_hash:
            progress.step(f"{prefix} is complete (same inputs and settings): nothing to do")
            return {**previous, "already_complete": True}
        raise ConfigError(f"{manifest} is from an export with other settings: pass --overwrite to replace it")
    if exists(work):
        recorded = (
            read_json(posixpath.join(work, "config.json"))
            if exists(posixpath.join(work, "config.json"))
            else {}
        )
        if recorded.get("config_hash") != config_hash or overwrite:
            if not overwrite:
                raise ConfigError(
                    f"{work} holds an interrupted export with other settings: pass --overwrite to start again"
                )
            remove_tree(work)
    make_dirs(work)
    write_json(posixpath.join(work, "config.json"), {"config_hash": config_hash, **config})

    dtype = optimal_dtype(tokenizer.vocab_size)
    listed = Listed.read(quarantine) if quarantine else None
    shards = [posixpath.join(work, f"shard-{i:05d}") for i in range(len(sources))]
    finished = {i for i, shard in enumerate(shards) if exists(done_path(shard))}
    progress.files(len(sources), len(finished))
    workers = getattr(executor, "workers", 1)
    progress.step(f"tokenizing {len(sources) - len(finished)} files ({workers} workers)")

    def report(index: int, result: ShardResult) -> None:
        if index not in finished:
            progress.file_done(result.documents, result.tokens, result.text_bytes)

    results: list[ShardResult] = executor.map(
        ExportShard(tokenizer, dtype.name, listed), list(zip(sources, shards, strict=True)), on_result=report
    )
    meta = {"tokenizer": tokenizer.describe(), "end_of_document_id": tokenizer.end_of_sample_id}
    if per_shard:
        progress.step(f"placing {len(shards)} shard prefixes")
        prefixes = [_place_shard(shard, shard_prefix(prefix, i), meta) for i, shard in enumerate(shards)]
        listing = [
            {"prefix": shard_prefix(prefix, i), "documents": r.documents, "tokens": r.tokens}
            for i, r in enumerate(results)
            if r.documents and prefixes[i]
        ]
    else:
        progress.step(f"merging {len(shards)} shards into {prefix}")
        _merge(shards, prefix, dtype, meta)
        totals = shard_summary(results)
        listing = [{"prefix": prefix, "documents": totals["documents"], "tokens": totals["tokens"]}]
    summary: dict[str, Any] = {
        **shard_summary(results),
        "prefixes": listing,
        "data_path": " ".join(f"{item['tokens']} {item['prefix']}" for item in listing),
        "dtype": dtype.name,
        "tokenizer": tokenizer.describe(),
        "end_of_document_id": tokenizer.end_of_sample_id,
        "quarantine": quarantine,
        "input": run_folder,
        "per_shard": per_shard,
        "config_hash": config_hash,
        "dataclean_version": __version__,
    }
    write_json(manifest, summary)
    remove_tree(work)
    return summary


def _place_shard(shard: str, target: str, meta: dict[str, Any]) -> bool:
    """Move a finished shard to its final prefix (its ids given the .idx digest); False when it
    has no documents (Megatron cannot blend an empty dataset: it is left out of the listing).
    The `.bin` moves last, so a shard whose `.bin` is gone was placed by an interrupted export."""
    if not exists(bin_path(shard)) and exists(bin_path(target)):
        return True
    ids = read_ids(ids_path(shard))
    if not ids.num_rows:
        return False
    index_source = idx_path(shard) if exists(idx_path(shard)) else idx_path(target)
    write_ids(ids_path(target), ids, {**meta, "idx_sha256": digest(_read_bytes(index_source))})
    fs, _ = filesystem(shard)
    for path in (idx_path, bin_path):
        if exists(path(shard)):
            fs.move(filesystem(path(shard))[1], filesystem(path(target))[1])
    return True


def _read_bytes(path: str) -> bytes:
    with open_input(path) as source:
        data: bytes = source.read()
    return data


def _merge(shards: list[str], prefix: str, dtype: np.dtype, meta: dict[str, Any]) -> None:
    """One prefix from the shards, in order: .bin concatenated, one .idx, ids renumbered."""
    lengths = [read_index(shard).sequence_lengths for shard in shards]
    with atomic_output(bin_path(prefix)) as sink:
        for shard in shards:
            with open_input(bin_path(shard)) as source:
                while chunk := source.read(COPY_BYTES):
                    sink.write(chunk)
    all_lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
    index_data = write_index(idx_path(prefix), all_lengths, dtype)
    tables = [read_ids(ids_path(shard)) for shard in shards]
    ids = pa.concat_tables(tables)
    ids = ids.set_column(
        ids.schema.get_field_index(DOCUMENT), DOCUMENT, pa.array(np.arange(ids.num_rows, dtype=np.int64))
    )
    write_ids(ids_path(prefix), ids, {**meta, "idx_sha256": digest(index_data)})
