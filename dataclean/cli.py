"""The `dataclean` command line: a thin layer over the library.

Library errors (`DatacleanError`) become one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import click
from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from dataclean.config import parse_settings, select_stages
from dataclean.errors import DatacleanError
from dataclean.executors import make_executor
from dataclean.io.readers import ReadOptions
from dataclean.kernels import compile_in_background
from dataclean.recipes import load_recipe
from dataclean.run import ALREADY_COMPLETE, run_pipeline, write_run_report
from dataclean.stage import Stage

console = Console(stderr=True)


def _split(values: tuple[str, ...]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def perplexity_settings(
    models: tuple[str, ...], max_ppl: tuple[str, ...], drop_fraction: float | None
) -> list[str]:
    """`dataclean run`'s --lm / --max-ppl / --drop-ppl-fraction as `--set` strings."""
    settings = []
    if models:
        settings.append(f"perplexity.models={','.join(models)}")
    if max_ppl:
        settings.append(f"perplexity_filter.max_ppl={','.join(max_ppl)}")
    if drop_fraction is not None:
        settings.append(f"perplexity_filter.drop_fraction={drop_fraction}")
    return settings


def summary_table(stats: dict[str, Any]) -> Table:
    """Rows in and out, drops by reason and seconds, per stage and in total, in 80 columns: the
    row names the stage, so reasons lose its prefix, one reason a line, never cut."""
    table = Table(
        title=f"dataclean run: {stats['seconds']['wall']:.2f} s", box=box.SIMPLE_HEAD, padding=(0, 1)
    )
    table.add_column("stage", no_wrap=True)
    table.add_column("rows in", justify="right", no_wrap=True)
    table.add_column("rows out", justify="right", no_wrap=True)
    table.add_column("dropped: reason rows", overflow="fold")
    table.add_column("seconds", justify="right", no_wrap=True)
    for stage in stats["stages"]:
        name = stage["stage"]
        lines = [f"{reason.removeprefix(name + ':')} {count:,}" for reason, count in stage["dropped"].items()]
        if stage["rows_added"] > 0:
            lines.append(f"(+{stage['rows_added']:,} chunks)")
        table.add_row(
            name,
            f"{stage['rows_in']:,}",
            f"{stage['rows_out']:,}",
            "\n".join(lines) or "-",
            f"{stage['seconds']:.2f}",
        )
    totals = stats["totals"]
    table.add_section()
    table.add_row(
        "total",
        f"{totals['rows_in']:,}",
        f"{totals['kept']:,}",
        f"{totals['excluded']:,} excluded\n{totals['quarantined']:,} quarantined",
        f"{stats['seconds']['wall']:.2f}",
    )
    return table


# Subcommands imported when used: `dataclean run` should not wait for pandas and numba before it
# starts Ray (its stages import what they need while Ray starts).
LAZY_COMMANDS = {
    "classify": "dataclean.classify.cli",
    "feedback": "dataclean.feedback.analysis.cli",
    "lm": "dataclean.lm.cli",
    "pack": "dataclean.pack.cli",
    "supervise": "dataclean.feedback.supervise_cli",
}


class _Handled(click.Group):
    """Turns DatacleanError into one line on stderr and its exit code; imports subcommands lazily."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *LAZY_COMMANDS])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in LAZY_COMMANDS:
            command = getattr(importlib.import_module(LAZY_COMMANDS[name]), name)
            return command if isinstance(command, click.Command) else None
        return super().get_command(ctx, name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except DatacleanError as error:
            console.print(f"[red]error:[/red] {error}", highlight=False, soft_wrap=True)
            sys.exit(error.exit_code)


@click.group(cls=_Handled)
@click.version_option(package_name="dataclean")
def cli() -> None:
    """dataclean: a data-quality pipeline for LLM training corpora."""


def _start(
    load_stages: Callable[[], list[Stage]], start_executor: Callable[[], Any]
) -> tuple[list[Stage], Any]:
    """The recipe's stages and a started executor. `ray.init` mostly waits for Ray's processes
    to start, so the stages (and the modules they import) load meanwhile, in a thread."""
    with ThreadPoolExecutor(1) as pool:
        loading = pool.submit(load_stages)
        engine = start_executor()
        try:
            return loading.result(), engine
        except BaseException:
            engine.close()
            raise


def _stages_and_report_ready(load_stages: Callable[[], list[Stage]]) -> list[Stage]:
    """The stages, then their kernels started compiling and the report's code loaded ahead of the
    report at the end of the run (0.4 s off it; this runs while Ray starts). A report that cannot
    load is the report's problem: it warns when it is written, and the run goes on."""
    stages = load_stages()
    compile_in_background(stages)  # dedup's kernels, while Ray starts (dataclean.kernels)
    try:
        from dataclean.report import prepare

        prepare()
    except Exception as error:
        logging.getLogger(__name__).debug("report not prepared ahead: %s", error)
    return stages


def _close_writing_report(engine: Any, output: str) -> None:
    """Close the executor and write OUT/report.html at once: Ray's shutdown mostly waits for its
    processes to exit, the report mostly reads Parquet."""
    closing = threading.Thread(target=engine.close, name="dataclean-executor-close")
    closing.start()
    try:
        write_run_report(output)
    finally:
        closing.join()


@cli.command()
@click.argument("inputs", nargs=-1, required=True)
@click.option("-o", "--output", required=True, help="Output folder (local path or URI).")
@click.option(
    "--pipeline",
    "recipe",
    default="default",
    show_default=True,
    help="Recipe name in pipelines/ or path to your own recipe .py file.",
)
@click.option("--executor", type=click.Choice(["ray", "local"]), default="ray", show_default=True)
@click.option("--address", default=None, help="Ray cluster address (default: embedded local Ray).")
@click.option("--workers", type=int, default=None, help="Parallel workers (default: all CPUs).")
@click.option("--text-column", default="text", show_default=True)
@click.option("--id-column", default="id", show_default=True)
@click.option(
    "--text-unit",
    type=click.Choice(["line", "file"]),
    default="line",
    show_default=True,
    help="For .txt inputs: one document per line or per file.",
)
@click.option(
    "--on-error",
    type=click.Choice(["raise", "skip"]),
    default="raise",
    show_default=True,
    help="skip: log a bad shard or row in excluded/ and go on.",
)
@click.option("--only", multiple=True, help="Run only these stages (comma-separated).")
@click.option("--skip", multiple=True, help="Skip these stages (comma-separated).")
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="STAGE.PARAM=VALUE",
    help="Set a stage parameter, e.g. --set clean.max_garbage_fraction=0.5.",
)
@click.option(
    "--max-chars",
    type=int,
    default=None,
    help="Split documents over N characters into samples (--set split.max_chars=N).",
)
@click.option(
    "--lm",
    "lm_models",
    multiple=True,
    metavar="LANG[=PATH]",
    help="Perplexity reference models, added to the bundled en and zh or replacing one: "
    "LANG=MODEL_DIR (from `dataclean lm train`; a local folder or a URI such as s3://bucket/de), "
    "or LANG=off, e.g. --lm en=models/web_en --lm de=s3://models/de --lm zh=off.",
)
@click.option(
    "--max-ppl",
    multiple=True,
    metavar="[LANG=]VALUE",
    help="Drop rows with a perplexity above VALUE, for all languages or one (e.g. --max-ppl zh=3000).",
)
@click.option(
    "--drop-ppl-fraction",
    type=float,
    default=None,
    help="Drop this fraction of each language's highest-perplexity rows, across all shards "
    "(default recipe: 0.002).",
)
@click.option(
    "--quarantine",
    "quarantine_list",
    default=None,
    metavar="LIST",
    help="Quarantine list from `dataclean feedback` (same as --set quarantine.path=LIST).",
)
@click.option(
    "--batch-rows",
    type=int,
    default=2048,
    show_default=True,
    help="Rows per batch through the stages (a batch also stops at about 32 MB of text).",
)
@click.option("--overwrite", is_flag=True, help="Replace an existing output folder.")
@click.option("--keep-work", is_flag=True, help="Keep intermediate files in OUT/_work.")
@click.option("--quiet", is_flag=True, help="No progress bar or summary table.")
def run(
    inputs: tuple[str, ...],
    output: str,
    recipe: str,
    executor: str,
    address: str | None,
    workers: int | None,
    text_column: str,
    id_column: str,
    text_unit: str,
    on_error: str,
    only: tuple[str, ...],
    skip: tuple[str, ...],
    settings: tuple[str, ...],
    max_chars: int | None,
    lm_models: tuple[str, ...],
    max_ppl: tuple[str, ...],
    drop_ppl_fraction: float | None,
    quarantine_list: str | None,
    batch_rows: int,
    overwrite: bool,
    keep_work: bool,
    quiet: bool,
) -> None:
    """Clean INPUTS (files, globs, folders, hf:PATH) into OUTPUT."""
    if max_chars is not None:  # sugar; an explicit --set split.max_chars wins
        settings = (f"split.max_chars={max_chars}", *settings)
    settings = (*perplexity_settings(lm_models, max_ppl, drop_ppl_fraction), *settings)
    if quarantine_list is not None:
        settings = (*settings, f"quarantine.path={quarantine_list}")
    read_options = ReadOptions(
        text_column=text_column,
        id_column=id_column,
        text_unit=text_unit,  # type: ignore[arg-type]
        batch_rows=batch_rows,
        on_error=on_error,  # type: ignore[arg-type]
    )
    stages, engine = _start(
        lambda: _stages_and_report_ready(
            lambda: select_stages(load_recipe(recipe), _split(only), _split(skip), parse_settings(settings))
        ),
        lambda: make_executor(executor, address, workers),
    )
    try:
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            disable=quiet or not console.is_terminal,
            transient=True,
        ) as bar:
            tasks: dict[str, Any] = {}

            def progress(label: str, done: int, total: int) -> None:
                if label not in tasks:
                    tasks[label] = bar.add_task(label, total=total)
                bar.update(tasks[label], completed=done)

            stats = run_pipeline(
                list(inputs),
                output,
                stages,
                engine,
                read_options,
                overwrite,
                keep_work,
                progress,
                pipeline_name=recipe,
                report=False,
            )
    except BaseException:
        engine.close()
        raise
    if stats.get(ALREADY_COMPLETE):
        engine.close()
        click.echo(
            f"{output} already holds this run, complete (same config and inputs): nothing to do; "
            f"{stats['totals']['kept']:,} rows kept. --overwrite runs it again."
        )
        return
    _close_writing_report(engine, output)
    if not quiet:
        # Not a terminal (a log, a pipe): 80 columns, which the table fits.
        Console(width=None if sys.stdout.isatty() else 80).print(summary_table(stats))
    click.echo(f"wrote {output}: {stats['totals']['kept']:,} rows kept", err=quiet)


@cli.command()
@click.argument("output")
@click.option(
    "--compare",
    "earlier",
    default=None,
    metavar="EARLIER_OUT",
    help="An earlier run's output folder: show what changed since (rows by reason, ids moved).",
)
def report(output: str, earlier: str | None) -> None:
    """Write OUTPUT/report.html: the run's funnel, drops with excerpts, scores and duplicates."""
    from dataclean.report import write_report  # plotly loads only for this command

    click.echo(f"wrote {write_report(output, earlier)}")


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `dataclean` command and `python -m dataclean`.

    Run as the program itself (no `argv`), the process ends as soon as the command has finished and
    its output is flushed: the interpreter's teardown of Ray's, Arrow's and numba's native modules
    takes another 0.4-0.6 s after a run (measured on the 1M-document benchmark) and does nothing a
    finished command needs. Called with `argv` (from Python), it returns or raises as usual.
    """
    if argv is not None:
        cli.main(args=argv, prog_name="dataclean")
        return
    try:
        cli.main(prog_name="dataclean")
    except SystemExit as finished:
        _exit_now(finished.code)
    _exit_now(0)


def _exit_now(code: int | str | None) -> None:
    """Flush what the command wrote, then leave without the interpreter's teardown; unless Ray is
    still up (an embedded Ray is stopped by its atexit hook), then exit the ordinary way."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        sys.exit(code)
    if isinstance(code, str):  # what sys.exit would print
        print(code, file=sys.stderr)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)
