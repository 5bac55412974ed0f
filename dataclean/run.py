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
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import dataclean
from dataclean.config import config_hash, describe
from dataclean.errors import ConfigError, OutputError
from dataclean.io import hf
from dataclean.io.layout import MANIFEST, OUTPUT_ENTRIES, Layout
from dataclean.io.readers import ReadOptions
from dataclean.io.shards import Shard, discover, filesystem
from dataclean.io.writers import exists, parquet_files, read_json, remove_tree, write_json
from dataclean.kernels import compile_kernels
from dataclean.runner import GroupTask, GroupWorker
from dataclean.stage import Executor, FitContext, GlobalStage, Stage
from dataclean.stats import summarize

Progress = Callable[[str, int, int], None]
# In the stats `run_pipeline` returns when OUT already holds this run, complete: nothing was run.
ALREADY_COMPLETE = "already_complete"
log = logging.getLogger(__name__)


@dataclass
class Group:
    """Row-local stages run together over each shard, ending at a barrier's `observe`."""

    stages: list[Stage] = field(default_factory=list)
    observer: GlobalStage | None = None


def plan(stages: Sequence[Stage]) -> list[Group]:
    """Cut stages into groups at each barrier; a barrier's apply starts the next group."""
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


def prepare_output(layout: Layout, config: dict[str, Any], overwrite: bool) -> dict[str, Any] | None:
    """Check OUT/ against the config: returns the earlier manifest when resuming, else None."""
    fs, path = filesystem(layout.root)
    if fs.get_file_info(path).is_file:
        raise OutputError(f"{layout.root} is a file: the output (-o) is a folder, new or from an earlier run")
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
    from pyarrow.fs import FileSelector

    entries = fs.get_file_info(FileSelector(path, allow_not_found=True))
    if entries and not overwrite:
        raise OutputError(f"{layout.root} exists and is not a dataclean output; use --overwrite")
    if entries:
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
        if isinstance(item, str) and not (item.startswith(hf.HF_PREFIX) or hf.is_saved_dataset(item)):
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
    progress: Progress | None = None,
    pipeline_name: str = "custom",
    report: bool = True,
) -> dict[str, Any]:
    """Run `stages` over `inputs` into `output`; returns the stats written to OUT/stats.json.

    `inputs`: paths, globs or folders (local or any pyarrow filesystem URI), `hf:PATH` specs,
    `save_to_disk` folders, or `datasets.Dataset`/`DatasetDict` objects. `report=False` leaves
    OUT/report.html to the caller (`write_run_report`), e.g. to write it while Ray shuts down.
    """
    started = time.perf_counter()
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
    write_json(layout.manifest, manifest)
    for stage in stages:  # before they are shipped to the workers (Stage.prepare)
        stage.prepare(f"{layout.work}/prepare-{stage.name}")
    compile_kernels(stages, executor)  # each kernel once, on the workers (dataclean.kernels)

    all_stats: list[dict[str, Any]] = []
    fit_seconds: dict[str, float] = {}
    for number, group in enumerate(groups):
        final = number == len(groups) - 1
        worker = GroupWorker(group.stages, group.observer, layout, read_options, final)
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
        label = "+".join(s.name for s in group.stages) or "read"
        if group.observer is not None:
            label += f" -> {group.observer.name}"
        count = len(done)
        if progress is not None:
            progress(label, count, len(shards))

        def finished(_index: int, _result: dict[str, Any], label: str = label) -> None:
            nonlocal count
            count += 1
            if progress is not None:
                progress(label, count, len(shards))

        all_stats.extend(done)
        all_stats.extend(executor.map(worker, tasks, on_result=finished))
        if group.observer is not None:
            summaries = parquet_files(layout.summaries(number))
            summary_shards = [layout.shard_of(path) for path in summaries]
            scratch = f"{layout.work}/fit-{group.observer.name}"
            fit_started = time.perf_counter()
            group.observer.fit(FitContext(summaries, scratch, executor, summary_shards))
            fit_seconds[group.observer.name] = time.perf_counter() - fit_started

    stats = summarize(all_stats, [s.name for s in stages], time.perf_counter() - started, fit_seconds)
    write_json(layout.stats, stats)
    manifest["complete"] = True
    write_json(layout.manifest, manifest)
    if not keep_work:
        remove_tree(layout.work)
    if report:
        write_run_report(layout.root)
    return stats


def write_run_report(root: str) -> None:
    """OUT/report.html; a report that cannot be built is a warning, never a failed run."""
    try:
        from dataclean.report import write_report

        write_report(root)
    except Exception as error:  # the run's data is written: do not lose it over a chart
        log.warning("report.html not written for %s: %s: %s", root, type(error).__name__, error)


def _same_inputs(old: dict[str, Any], new: dict[str, Any]) -> bool:
    return bool(old.get("inputs") == new.get("inputs"))
