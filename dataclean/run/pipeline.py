"""Run a pipeline over input shards into an output folder: the driver's side of every executor.

The stages are cut into groups at each barrier (`GlobalStage`): a group runs its row-local stages
over every shard in parallel and ends with the next barrier's `observe`; the driver then calls the
barrier's `fit`, and the next group starts by applying it. Each (group, shard) task leaves a done
marker with its stats, so a rerun with the same config does only what is missing, and a rerun
with another config refuses (naming the changed settings) unless told to overwrite.

Memory: the driver holds the shard list, one small stats dict per (group, shard) task and what
each barrier's `fit` needs (see each GlobalStage's docstring); never rows. A worker holds one
batch (`ReadOptions.batch_rows` rows, at most about `batch_bytes` of text), one row group being
buffered per output folder (`dataclean.io.writers.ROW_GROUP_BYTES`) and its stages' models.
Rows move between groups as Parquet files under OUT/_work written by the workers, not through the
Ray object store, so the store carries only task descriptors and stats.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import dataclean
from dataclean import columns as C
from dataclean.config import config_hash, describe
from dataclean.errors import ConfigError, OutputError
from dataclean.executors.base import Executor
from dataclean.io import hf
from dataclean.io.files import atomic_output, read_parquet
from dataclean.io.layout import MANIFEST, OUTPUT_ENTRIES, Layout
from dataclean.io.readers import ReadOptions, parquet_columns
from dataclean.io.shards import Shard, discover, filesystem
from dataclean.io.writers import exists, parquet_files, read_json, remove_tree, write_json
from dataclean.kernel_cache import kernels_cached, mark_kernels_cached
from dataclean.progress import RunProgress, Silent
from dataclean.runner import GroupTask, GroupWorker, redaction
from dataclean.stage import FitContext, GlobalStage, Stage
from dataclean.stats import summarize
from dataclean.warmup import compile_estimate, compile_kernels, kernel_stages

# About how long an embedded Ray takes to start on 2 busy cores (measured here: 2.5-4.5 s).
RAY_START_SECONDS = 3.0
# In the stats `run_pipeline` returns when OUT already holds this run, complete: nothing was run.
ALREADY_COMPLETE = "already_complete"
log = logging.getLogger(__name__)
# The columns every batch has when it leaves the reader (`dataclean.io.readers`).
READER_COLUMNS = (C.ID, C.TEXT, C.PARENT_ID, C.BAD_BYTES)


@dataclass
class Group:
    """Row-local stages run together over each shard, ending at a barrier's `observe`."""

    stages: list[Stage] = field(default_factory=list)
    observer: GlobalStage | None = None


def plan(stages: Sequence[Stage]) -> list[Group]:
    """Check the stage names are unique, then cut the stages into groups at each barrier; a
    barrier's apply starts the next group. (`run_pipeline` checks the columns, `check_columns`,
    once it knows the inputs.)"""
    names = [stage.name for stage in stages]
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        raise ConfigError(f"stage names must be unique in a pipeline: {', '.join(duplicated)}")
    groups = [Group()]
    for stage in stages:
        if isinstance(stage, GlobalStage) and stage.is_barrier():
            groups[-1].observer = stage
            groups.append(Group(stages=[stage]))
        else:
            groups[-1].stages.append(stage)
    return groups


def _producers_of(column: str) -> list[str]:
    """Names of dataclean's own stages (`dataclean.stages`, as loaded in this process) that provide
    `column`: the hint of a missing-column error."""
    found: list[str] = []
    pending = list(Stage.__subclasses__())
    while pending:
        kind = pending.pop()
        pending.extend(kind.__subclasses__())
        bundled = kind.__module__.startswith("dataclean.stages.")
        if bundled and column in kind.provides and getattr(kind, "name", None) and kind.name not in found:
            found.append(kind.name)
    return sorted(found)


def input_columns(shards: Sequence[Shard]) -> tuple[str, ...]:
    """The columns the inputs carry, as far as planning knows them without reading a row: those
    of the first shard's Parquet footer (e.g. a previous run's OUT/data, to re-run its filters),
    none for JSONL and text inputs."""
    if not shards or shards[0].format != "parquet":
        return ()
    return tuple(parquet_columns(shards[0]))


def check_columns(stages: Sequence[Stage], given: Sequence[str] = ()) -> None:
    """Every column a stage requires is the reader's (`READER_COLUMNS`), one the inputs carry
    (`given`, see `input_columns`) or one a stage before it provides, and every column has one
    producer among the stages; else a `ConfigError` of one line naming the stage and the column.
    A stage may provide a column the input carries: the language stage keeps an input `lang`
    (labelling only its empty rows), perplexity an input `ppl` (unless `rescore`), dedup replaces
    its columns (docs/contracts.md, "Rows and columns")."""
    producers: dict[str, str] = {}
    for stage in stages:
        for column in stage.required_columns():
            if column not in READER_COLUMNS and column not in given and column not in producers:
                known = _producers_of(column)
                hint = f" (add the {' or '.join(known)} stage before it)" if known else ""
                raise ConfigError(
                    f"stage {stage.name!r} needs column {column!r}, which no stage before it provides{hint}"
                )
        for column in stage.provided_columns():
            if column in READER_COLUMNS or column in producers:
                first = "the reader" if column in READER_COLUMNS else f"stage {producers[column]!r}"
                raise ConfigError(
                    f"stage {stage.name!r} provides column {column!r}, which {first} provides already: "
                    "a column has one producer"
                )
            producers[column] = stage.name


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


def _task_done(layout: Layout, group: int, shard: Shard) -> dict[str, Any] | None:
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


def run_pipeline(
    inputs: Sequence[Any],
    output: str,
    stages: Sequence[Stage],
    executor: Executor,
    read_options: ReadOptions | None = None,
    overwrite: bool = False,
    keep_work: bool = False,
    progress: RunProgress | None = None,
    pipeline_name: str = "custom",
    report: bool = True,
) -> dict[str, Any]:
    """Run `stages` over `inputs` into `output`; returns the stats written to OUT/stats.json.

    `inputs`: paths, globs or folders (local or any pyarrow filesystem URI), `hf:PATH` specs,
    `save_to_disk` folders, or `datasets.Dataset`/`DatasetDict` objects. `report=False` leaves
    OUT/report.html to the caller (`write_run_report`), e.g. to write it while Ray shuts down.
    """
    started = time.perf_counter()
    progress = progress or Silent()
    read_options = read_options or ReadOptions()
    layout = Layout(output.rstrip("/"))
    groups = plan(stages)
    config = {
        "pipeline": pipeline_name,
        "stages": describe(stages),
        "read": asdict(read_options),
    }
    resumed = prepare_output(layout, config, overwrite)
    shards = discover(resolve_inputs(inputs, layout))
    check_columns(stages, input_columns(shards))  # before any row is read, on every executor
    manifest = {
        "dataclean_version": dataclean.__version__,
        "config": config,
        "config_hash": config_hash(config),
        "inputs": [{"uri": s.uri, "name": s.name, "size": s.size, "mtime": s.mtime} for s in shards],
        "complete": False,
    }
    if resumed and resumed.get("complete"):
        if _same_inputs(resumed, manifest) and exists(layout.stats):
            # Nothing to do: the stats of the run that finished, marked so (not in stats.json).
            return {**read_json(layout.stats), ALREADY_COMPLETE: True}
        clear_output(layout)  # same config, changed inputs: a completed run starts over
        resumed = None
    megabytes = sum(shard.size for shard in shards) / 1e6
    files = f"{len(shards):,} input file{'s' if len(shards) != 1 else ''}"
    if resumed is not None:
        progress.step(f"resuming the run in {layout.root} (same config): {files}, {megabytes:,.1f} MB")
    else:
        progress.step(f"{files}, {megabytes:,.1f} MB")
    write_json(layout.manifest, manifest)
    for stage in stages:  # before they are shipped to the workers (Stage.prepare)
        stage.prepare(f"{layout.work}/prepare-{stage.name}")
    _compile(stages, executor, progress)

    redactor, unredacted = redaction(list(stages))
    all_stats: list[dict[str, Any]] = []
    fit_seconds: dict[str, float] = {}
    for number, group in enumerate(groups):
        final = number == len(groups) - 1
        worker = GroupWorker(group.stages, group.observer, layout, read_options, final, redactor, unredacted)
        tasks, done = [], []
        for shard in shards:
            recorded = _task_done(layout, number, shard)
            if recorded is not None:
                done.append(recorded)
                continue
            sources = None
            if number > 0:
                sources = tuple(parquet_files(layout.group(number - 1), f"{layout.shard_stem(shard.index)}-"))
            tasks.append(GroupTask(number, shard, sources))
        label = _group_label(group)
        progress.group(label, len(shards), len(done))

        def finished(_index: int, result: dict[str, Any], label: str = label) -> None:
            rows, text_bytes = _read_counts(result)
            progress.task(label, rows, text_bytes)

        all_stats.extend(done)
        all_stats.extend(executor.map(worker, tasks, on_result=finished))
        if group.observer is not None:
            summaries = parquet_files(layout.summaries(number))
            summary_shards = [layout.shard_of(path) for path in summaries]
            scratch = f"{layout.work}/fit-{group.observer.name}"
            progress.step(f"{group.observer.name}: fitting over the whole corpus")
            fit_started = time.perf_counter()
            group.observer.fit(FitContext(summaries, scratch, executor, summary_shards))
            fit_seconds[group.observer.name] = time.perf_counter() - fit_started

    progress.step("writing stats")
    for stage in stages:
        if stage.records_file is not None:
            merge_records(layout, stage)
    stats = summarize(all_stats, [s.name for s in stages], time.perf_counter() - started, fit_seconds)
    write_json(layout.stats, stats)
    manifest["complete"] = True
    write_json(layout.manifest, manifest)
    if not keep_work:
        remove_tree(layout.work)
    if report:
        progress.step("writing report")
        write_run_report(layout.root)
    return stats


def _compile(stages: Sequence[Stage], executor: Executor, progress: RunProgress) -> None:
    """`compile_kernels`, saying so on a first run (with about how long), silent on a warm one."""
    kinds = [type(stage) for stage in kernel_stages(stages)]
    if not kinds:
        return
    cached = kernels_cached(kinds)
    if not cached:
        estimate = compile_estimate(stages, executor.workers)
        if getattr(executor, "starting", False):
            estimate += RAY_START_SECONDS  # its workers compile once it is up
        progress.step(f"compiling kernels: first run only, about {estimate:.0f} s")
    compile_kernels(stages, executor, cached)  # each kernel once, on the workers (dataclean.warmup)
    if not cached:
        mark_kernels_cached(kinds)


def _group_label(group: Group) -> str:
    """A group as its progress lines name it: its first and last stage ("clean..dedup")."""
    names = [stage.name for stage in group.stages]
    if group.observer is not None and group.observer.name not in names:
        names.append(group.observer.name)
    if not names:
        return "read"
    return names[0] if len(names) == 1 else f"{names[0]}..{names[-1]}"


def _read_counts(task_stats: dict[str, Any]) -> tuple[int, int]:
    """(rows, UTF-8 text bytes) a task read: its first stage's rows in, and the text bytes of
    the first stage that counts them (the reader counts rows only)."""
    stages = list(task_stats.get("stages", {}).values())
    if not stages:
        return 0, 0
    text_bytes = next((int(stage["bytes_in"]) for stage in stages if stage.get("bytes_in")), 0)
    return int(stages[0].get("rows_in", 0)), text_bytes


def merge_records(layout: Layout, stage: Stage) -> None:
    """OUT/{stage.records_file}: the records its workers wrote (`with_records`), shard by shard,
    one row group per part, so memory holds one part at a time; an empty file when none."""
    assert stage.records_file is not None and stage.records_schema is not None
    schema = pa.schema([pa.field(C.ID, pa.string()), *stage.records_schema])
    with (
        atomic_output(f"{layout.root}/{stage.records_file}") as sink,
        pq.ParquetWriter(sink, schema) as writer,
    ):
        for path in parquet_files(layout.records(stage.name)):
            writer.write_table(read_parquet(path).cast(schema))


def write_run_report(root: str) -> None:
    """OUT/report.html; a report that cannot be built is a warning, never a failed run."""
    try:
        from dataclean.report import write_report

        write_report(root)
    except Exception as error:  # the run's data is written: do not lose it over a chart
        log.warning("report.html not written for %s: %s: %s", root, type(error).__name__, error)


def _same_inputs(old: dict[str, Any], new: dict[str, Any]) -> bool:
    return bool(old.get("inputs") == new.get("inputs"))
