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
from dataclasses import asdict, dataclass
from typing import Any

import dataclean
from dataclean.executors.base import Executor, require_executor
from dataclean.io.layout import Layout
from dataclean.io.readers import ReadOptions
from dataclean.io.shards import Shard, discover
from dataclean.io.writers import exists, parquet_files, read_json, remove_tree, write_json
from dataclean.run.config import config_hash, declared, describe
from dataclean.run.kernel_cache import kernels_cached, mark_kernels_cached
from dataclean.run.kernels import compile_estimate, compile_kernels, kernel_stages, leave_in_background
from dataclean.run.node_kernels import NodeKernels
from dataclean.run.output import (
    clear_output,
    merge_records,
    prepare_output,
    resolve_inputs,
    same_inputs,
    task_done,
)
from dataclean.run.plan import Group, check_columns, input_columns, plan
from dataclean.run.progress import RunProgress, Silent
from dataclean.run.routing import redaction
from dataclean.run.shard import GroupTask, GroupWorker
from dataclean.run.stats import summarize
from dataclean.stage import FitContext, GlobalStage, Stage

# About how long an embedded Ray takes to start on 2 busy cores (measured here: 2.5-4.5 s).
RAY_START_SECONDS = 3.0
# In the stats `run_pipeline` returns when OUT already holds this run, complete: nothing was run.
ALREADY_COMPLETE = "already_complete"
log = logging.getLogger(__name__)


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
    executor = require_executor(executor)
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
    check_columns(stages, input_columns(shards, read_options))  # before any row is read, on every executor
    manifest = {
        "dataclean_version": dataclean.__version__,
        "config": config,
        "config_hash": config_hash(config),
        "declared": declared(stages),
        "inputs": [{"uri": s.uri, "name": s.name, "size": s.size, "mtime": s.mtime} for s in shards],
        "complete": False,
    }
    if resumed and resumed.get("complete"):
        if same_inputs(resumed, manifest) and exists(layout.stats):
            # Nothing to do: the stats of the run that finished, marked so (not in stats.json).
            return {**read_json(layout.stats), ALREADY_COMPLETE: True}
        clear_output(layout)  # same config, changed inputs: a completed run starts over
        resumed = None
    _say_inputs(progress, layout, shards, resumed is not None)
    write_json(layout.manifest, manifest)
    for stage in stages:  # before they are shipped to the workers (Stage.prepare)
        stage.prepare(f"{layout.work}/prepare-{stage.name}")
    nodes = _compile(stages, executor, progress)

    redactor, unredacted = redaction(list(stages))
    all_stats: list[dict[str, Any]] = []
    fits: dict[str, _Fit] = {}
    for number, group in enumerate(groups):
        final = number == len(groups) - 1
        worker = GroupWorker(group.stages, group.observer, layout, read_options, final, redactor, unredacted)
        all_stats.extend(_run_group(number, group, worker, shards, layout, executor, progress))
        if group.observer is not None:
            fits[group.observer.name] = _fit(number, group.observer, layout, executor, progress)

    if nodes is not None:
        nodes.close()  # (a run that fails leaves it watching until the executor closes)
    progress.step("writing stats")
    for stage in stages:
        if stage.outputs.records is not None:
            merge_records(layout, stage)
    stats = summarize(
        all_stats,
        [s.name for s in stages],
        time.perf_counter() - started,
        {name: fit.seconds for name, fit in fits.items()},
        {name: fit.stats for name, fit in fits.items() if fit.stats},
    )
    write_json(layout.stats, stats)
    manifest["complete"] = True
    write_json(layout.manifest, manifest)
    if not keep_work:
        remove_tree(layout.work)
    if report:
        progress.step("writing report")
        write_run_report(layout.root)
    return stats


def _say_inputs(progress: RunProgress, layout: Layout, shards: Sequence[Shard], resumed: bool) -> None:
    """The run's first progress line about its inputs (and whether it resumes an earlier run)."""
    megabytes = sum(shard.size for shard in shards) / 1e6
    files = f"{len(shards):,} input file{'s' if len(shards) != 1 else ''}"
    if resumed:
        progress.step(f"resuming the run in {layout.root} (same config): {files}, {megabytes:,.1f} MB")
    else:
        progress.step(f"{files}, {megabytes:,.1f} MB")


def _run_group(
    number: int,
    group: Group,
    worker: GroupWorker,
    shards: Sequence[Shard],
    layout: Layout,
    executor: Executor,
    progress: RunProgress,
) -> list[dict[str, Any]]:
    """One stage group over every shard: the tasks an earlier run finished are taken from their
    done markers, the others mapped on the executor; every task's stats, in shard order."""
    tasks, done = [], []
    for shard in shards:
        recorded = task_done(layout, number, shard)
        if recorded is not None:
            done.append(recorded)
            continue
        sources = None
        if number > 0:
            sources = tuple(parquet_files(layout.group(number - 1), f"{layout.shard_stem(shard.index)}-"))
        tasks.append(GroupTask(number, shard, sources))
    label = _group_label(group)
    progress.group(label, len(shards), len(done))

    def finished(_index: int, result: dict[str, Any]) -> None:
        rows, text_bytes = _read_counts(result)
        progress.task(label, rows, text_bytes)

    return [*done, *executor.map(worker, tasks, on_result=finished)]


@dataclass(frozen=True)
class _Fit:
    """A barrier's fit: its seconds on the driver and the statistics it returned."""

    seconds: float
    stats: dict[str, Any]


def _fit(
    number: int, barrier: GlobalStage, layout: Layout, executor: Executor, progress: RunProgress
) -> _Fit:
    """The barrier's `fit` over the summaries group `number` wrote, timed."""
    summaries = parquet_files(layout.summaries(number))
    summary_shards = [layout.shard_of(path) for path in summaries]
    scratch = f"{layout.work}/fit-{barrier.name}"
    progress.step(f"{barrier.name}: fitting over the whole corpus")
    started = time.perf_counter()
    returned = barrier.fit(FitContext(summaries, scratch, executor, summary_shards))
    return _Fit(time.perf_counter() - started, dict(returned or {}))


def _compile(stages: Sequence[Stage], executor: Executor, progress: RunProgress) -> NodeKernels | None:
    """`compile_kernels`, saying so on a first run (with about how long), silent on a warm one.
    On a cluster each node has a cache of its own: each is asked and prepared (`NodeKernels`,
    returned to be closed when the run ends), and the driver's own cache is left to the kernels
    it compiles for its fits."""
    kinds = [type(stage) for stage in kernel_stages(stages)]
    if not kinds:
        return None
    if executor.nodes():
        leave_in_background(stages)  # the driver's fits load them when they need them
        nodes = NodeKernels(stages, executor, progress)
        nodes.start()
        return nodes
    cached = kernels_cached(kinds)
    if not cached:
        estimate = compile_estimate(stages, executor.workers)
        if executor.starting:
            estimate += RAY_START_SECONDS  # its workers compile once it is up
        progress.step(f"compiling kernels: first run only, about {estimate:.0f} s")
    compile_kernels(stages, executor, cached)  # each kernel once, on the workers (dataclean.run.kernels)
    if not cached:
        mark_kernels_cached(kinds)
    return None


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


def write_run_report(root: str) -> None:
    """OUT/report.html; a report that cannot be built is a warning, never a failed run."""
    try:
        from dataclean.report import write_report

        write_report(root)
    except Exception as error:  # the run's data is written: do not lose it over a chart
        log.warning("report.html not written for %s: %s: %s", root, type(error).__name__, error)
