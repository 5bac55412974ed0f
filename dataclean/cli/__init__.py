"""The `dataclean` command line: a thin layer over the library.

Library errors (`DatacleanError`) become one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

import click
from rich import box
from rich.console import Console
from rich.table import Table

from dataclean.cli.exit import exit_process
from dataclean.cli.piped import piped_output
from dataclean.cli.progress import STARTED, RunDisplay
from dataclean.errors import ConfigError, DatacleanError
from dataclean.io.readers import ReadOptions
from dataclean.run.config import parse_settings, select_stages
from dataclean.run.output import check_paths
from dataclean.run.pipeline import ALREADY_COMPLETE
from dataclean.run.progress import Silent
from dataclean.run.recipes import load_recipe
from dataclean.run.session import Session
from dataclean.stage import Stage

console = Console(stderr=True)


def _split(values: tuple[str, ...]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _stage_of_type(stages: Sequence[Stage], kind: type[Stage], option: str) -> str:
    """The name of the recipe's one stage of type `kind` (whatever the recipe calls it), for an
    option that sets it."""
    names = [stage.name for stage in stages if isinstance(stage, kind)]
    if len(names) != 1:
        found = "none" if not names else ", ".join(names)
        raise ConfigError(
            f"{option}: needs one {kind.name} stage ({kind.__name__}) in the recipe, found {found}"
        )
    return names[0]


def option_settings(
    stages: Sequence[Stage],
    max_chars: int | None = None,
    models: tuple[str, ...] = (),
    max_ppl: tuple[str, ...] = (),
    drop_fraction: float | None = None,
    quarantine: str | None = None,
) -> tuple[list[str], list[str]]:
    """`dataclean run`'s shorthand options as `--set` strings for the recipe's stages of their
    type: (those an explicit `--set` overrides, those that override it)."""
    from dataclean.stages.perplexity import FilterPerplexity, ScorePerplexity
    from dataclean.stages.quarantine import DropQuarantined
    from dataclean.stages.split import SplitLongDocuments

    before, after = [], []
    if max_chars is not None:
        before.append(f"{_stage_of_type(stages, SplitLongDocuments, '--max-chars')}.max_chars={max_chars}")
    if models:
        before.append(f"{_stage_of_type(stages, ScorePerplexity, '--lm')}.models={','.join(models)}")
    if max_ppl:
        before.append(f"{_stage_of_type(stages, FilterPerplexity, '--max-ppl')}.max_ppl={','.join(max_ppl)}")
    if drop_fraction is not None:
        name = _stage_of_type(stages, FilterPerplexity, "--drop-ppl-fraction")
        before.append(f"{name}.drop_fraction={drop_fraction}")
    if quarantine is not None:
        after.append(f"{_stage_of_type(stages, DropQuarantined, '--quarantine')}.path={quarantine}")
    return before, after


def summary_table(stats: dict[str, Any]) -> Table:
    """Rows in and out, drops by reason and seconds, per stage and in total, in 80 columns. Each
    stage's reasons follow its row, one a line, indented under its name and without its prefix
    (the row above names the stage), so a long reason name is never folded or cut."""
    table = Table(
        title=f"dataclean run: {stats['seconds']['wall']:.2f} s", box=box.SIMPLE_HEAD, padding=(0, 1)
    )
    table.add_column("stage / drop reason", overflow="fold")
    table.add_column("rows in", justify="right", no_wrap=True)
    table.add_column("rows out", justify="right", no_wrap=True)
    table.add_column("dropped", justify="right", no_wrap=True)
    table.add_column("seconds", justify="right", no_wrap=True)
    for stage in stats["stages"]:
        name = stage["stage"]
        dropped = sum(stage["dropped"].values())
        added = f"+{stage['rows_added']:,} chunks" if stage["rows_added"] > 0 else ""
        table.add_row(
            name,
            f"{stage['rows_in']:,}",
            f"{stage['rows_out']:,}",
            f"{dropped:,}" if dropped else added or "-",
            f"{stage['seconds']:.2f}",
        )
        for reason, count in sorted(stage["dropped"].items(), key=lambda item: -item[1]):
            table.add_row(f"  {reason.removeprefix(name + ':')}", "", "", f"{count:,}", "", style="dim")
    totals = stats["totals"]
    table.add_section()
    table.add_row(
        "total",
        f"{totals['rows_in']:,}",
        f"{totals['kept']:,}",
        f"{totals['excluded']:,}",
        f"{stats['seconds']['wall']:.2f}",
    )
    if totals["quarantined"]:
        table.add_row("  quarantined", "", "", f"{totals['quarantined']:,}", "")
    return table


def fit_warnings(stats: dict[str, Any]) -> list[str]:
    """The warning lines barriers' fits returned (their `warnings` statistic: dedup's largest
    clusters and sources that lost most), in stage order."""
    return [line for stage in stats["stages"] for line in (stage.get("fit") or {}).get("warnings", [])]


# Subcommands imported when used: `dataclean run` should not wait for pandas and numba before it
# starts Ray (its stages import what they need while Ray starts).
LAZY_COMMANDS = {
    "classify": "dataclean.classify.cli",
    "export": "dataclean.export.cli",
    "feedback": "dataclean.feedback.analysis.cli",
    "lm": "dataclean.lm.cli",
    "megatron": "dataclean.export.megatron.cli",
    "pack": "dataclean.pack.cli",
    "supervise": "dataclean.feedback.supervise_cli",
    "warmup": "dataclean.cli.warmup",
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
@click.option(
    "--workers",
    type=int,
    default=None,
    help="Processes working at once (default: all CPUs); with an embedded Ray, this one among them.",
)
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
    help="Split documents over N characters into samples (max_chars of the recipe's split stage).",
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
    help="Quarantine list from `dataclean feedback` (path of the recipe's quarantine stage, whatever "
    "its name).",
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
@click.option("--quiet", is_flag=True, help="No progress lines or summary table.")
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
    read_options = ReadOptions(
        text_column=text_column,
        id_column=id_column,
        text_unit=text_unit,  # type: ignore[arg-type]
        batch_rows=batch_rows,
        on_error=on_error,  # type: ignore[arg-type]
    )

    def load() -> list[Stage]:
        stages = load_recipe(recipe)
        before, after = option_settings(
            stages, max_chars, lm_models, max_ppl, drop_ppl_fraction, quarantine_list
        )
        return select_stages(stages, _split(only), _split(skip), parse_settings([*before, *settings, *after]))

    check_paths(inputs, output, overwrite)  # before anything loads or starts: one line, at once
    display = Silent() if quiet else RunDisplay(console)
    with (
        piped_output(STARTED),  # piped stderr: Ray's lines too stamped, no colour (dataclean.cli.piped)
        display if isinstance(display, RunDisplay) else nullcontext(),
        Session(load, executor, address, workers, progress=display) as session,
    ):
        stats = session.run(list(inputs), output, read_options, overwrite, keep_work, pipeline_name=recipe)
    if stats.get(ALREADY_COMPLETE):
        click.echo(
            f"{output} already holds this run, complete (same config and inputs): nothing to do; "
            f"{stats['totals']['kept']:,} rows kept. --overwrite runs it again."
        )
        return
    if not quiet:
        # Not a terminal (a log, a pipe): 80 columns, which the table fits.
        Console(width=None if sys.stdout.isatty() else 80).print(summary_table(stats))
    for line in fit_warnings(stats):
        click.echo(f"warning: {line}", err=True)
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

    Run as the program itself (no `argv`), the process ends as soon as the command has finished
    and its output is flushed (`dataclean.cli.exit.exit_process` says why). Called with `argv`
    (from Python), it returns or raises as usual.
    """
    if argv is not None:
        cli.main(args=argv, prog_name="dataclean")
        return
    try:
        cli.main(prog_name="dataclean")
    except SystemExit as finished:
        exit_process(finished.code)
    exit_process(0)
