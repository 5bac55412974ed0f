"""`dataclean feedback`: training logs in, a quarantine list, spikes.json, a report and a picture out.

    dataclean feedback --losses PATH [--steps PATH] [--corpus OUT] -o DIR [--merge LIST]
    dataclean feedback --steps TRAIN.LOG --megatron DATA_ARGS [--losses PATH] [--corpus OUT] -o DIR

Writes DIR/quarantine.parquet (merged with --merge LIST without duplicates), DIR/spikes.json,
DIR/report.md and DIR/training.png. With `--megatron` (Megatron-LM's data options) the documents
of every data spike's iteration join the list for review (`dataclean.feedback.analysis.megatron_cli`).
The next `dataclean run ... --quarantine DIR/quarantine.parquet` leaves the listed samples out.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from dataclean.errors import DatacleanError
from dataclean.feedback.analysis.accept import accept_command
from dataclean.feedback.analysis.analyze import Settings, analyze
from dataclean.feedback.analysis.kinds import kinds_records
from dataclean.feedback.analysis.replay_cli import replay_command
from dataclean.feedback.analysis.report import markdown, plot, write_spikes
from dataclean.feedback.detectors import DiagnosisRules
from dataclean.quarantine.lists import merge_lists, read_list, write_list


@click.group("feedback", invoke_without_command=True)
@click.option(
    "--losses",
    type=click.Path(exists=True),
    help="Per-sample loss log (file or folder).",
)
@click.option(
    "--steps",
    type=click.Path(exists=True),
    help="Step log: step, loss [, lr, grad_norm, loss_scale].",
)
@click.option(
    "--corpus",
    type=click.Path(exists=True),
    help="The dataclean output the training read (for text hashes and excerpts).",
)
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Path(file_okay=False),
    help="Folder for the list, spikes and report.",
)
@click.option(
    "--merge",
    "merge_with",
    type=click.Path(exists=True, dir_okay=False),
    help="An existing quarantine list to merge into the new one.",
)
@click.option(
    "--window",
    default=200,
    show_default=True,
    help="Steps around a sample that form its reference.",
)
@click.option(
    "--z",
    "z_threshold",
    default=3.5,
    show_default=True,
    help="Robust z-score above which a sample is an outlier.",
)
@click.option(
    "--spike-k",
    default=4.0,
    show_default=True,
    help="Standard deviations above the recent mean for a spike.",
)
@click.option(
    "--spike-ratio",
    default=1.5,
    show_default=True,
    help="Times the recent loss level a spike must reach.",
)
@click.option("--spike-method", type=click.Choice(["std", "mad"]), default="std", show_default=True)
@click.option(
    "--outliers",
    type=click.Choice(["review", "drop", "downweight"]),
    default=None,
    help="What the list does with persistent outliers: review (default: listed, applied once "
    "accepted with `dataclean feedback accept`), drop or downweight. Spike culprits are dropped.",
)
@click.option(
    "--megatron",
    "megatron_args",
    default=None,
    metavar="DATA_ARGS",
    help="Megatron-LM's data options as `dataclean megatron locate` takes them, quoted as one "
    "(or @FILE holding them): the documents of every data spike in --steps (Megatron's log) are "
    "listed for review, ranked by --losses (`dataclean megatron losses`) or else the corpus's ppl "
    "and quality.",
)
@click.option("--action", type=click.Choice(["drop", "downweight"]), default=None, hidden=True)
@click.option("--weight", default=0.1, show_default=True, help="Weight of down-weighted samples.")
@click.option(
    "--group-by",
    "group_by",
    multiple=True,
    help="A corpus column to rank kinds of samples by (repeatable; source, lang, url host, "
    "ppl_bucket, quality_*, dup_cluster are always ranked).",
)
@click.pass_context
def feedback(
    ctx: click.Context,
    losses: str | None,
    steps: str | None,
    corpus: str | None,
    output: str | None,
    merge_with: str | None,
    window: int,
    z_threshold: float,
    spike_k: float,
    spike_ratio: float,
    spike_method: str,
    outliers: str | None,
    action: str | None,
    weight: float,
    group_by: tuple[str, ...],
    megatron_args: str | None,
) -> None:
    """Find samples that hurt training and write a quarantine list for the next run.

    `dataclean feedback replay --step N ...` shows the samples of one step instead.
    """
    if ctx.invoked_subcommand is not None:
        return
    if (losses is None and megatron_args is None) or output is None:
        raise click.UsageError("Missing option '--losses' or '-o' / '--output'.")
    if megatron_args is not None and steps is None:
        raise click.UsageError("--megatron needs --steps: Megatron-LM's training log.")
    settings = Settings(
        window=window,
        z_threshold=z_threshold,
        spike_k=spike_k,
        spike_ratio=spike_ratio,
        spike_method=spike_method,  # type: ignore[arg-type]
        outliers=(outliers or action or "review"),  # type: ignore[arg-type]
        weight=weight,
        rules=DiagnosisRules(),
        group_by=group_by,
    )
    try:
        analysis = analyze(losses, steps, corpus, settings)
        if megatron_args is not None:
            from dataclean.feedback.analysis.megatron_cli import megatron_suspects

            suspects = megatron_suspects(megatron_args, analysis, str(steps), corpus)
            analysis.quarantine = merge_lists(analysis.quarantine, suspects)
        quarantine = analysis.quarantine
        if merge_with:
            quarantine = merge_lists(read_list(merge_with), quarantine)
        out = Path(output)
        out.mkdir(parents=True, exist_ok=True)
        write_list(quarantine, out / "quarantine.parquet")
        write_spikes(analysis.spikes, out / "spikes.json")
        if corpus:
            (out / "kinds.json").write_text(json.dumps(kinds_records(analysis.kinds), indent=1, default=str))
        drew = plot(analysis, out / "training.png")
        report = markdown(analysis, quarantine, "training.png" if drew else None)
        (out / "report.md").write_text(report, encoding="utf-8")
    except DatacleanError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(error.exit_code)
    by_kind: dict[str, int] = {}
    for spike in analysis.spikes:
        by_kind[spike.diagnosis] = by_kind.get(spike.diagnosis, 0) + 1
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(by_kind.items())) or "none"
    click.echo(
        f"{analysis.losses.table.num_rows} loss rows, {analysis.nonfinite} non-finite; "
        f"spikes: {kinds}; quarantined {analysis.quarantine.num_rows} "
        f"({quarantine.num_rows} in the list) -> {out / 'quarantine.parquet'}"
    )
    for note in analysis.notes:
        click.echo(f"note: {note}")
    review = sum(1 for a in quarantine.column("action").to_pylist() if a == "review")
    if review:
        click.echo(
            f"{review} entries are for review (listed, not applied): see report.md, then "
            f"`dataclean feedback accept {out / 'quarantine.parquet'} --id/--reason/--group ...`"
        )
    for kind in [k for k in analysis.kinds if k.flagged][:5]:
        click.echo(
            f"kind: {kind.column}={kind.value}: {kind.samples} samples, {kind.outliers} outliers, "
            f"effect A {kind.effect:.2f}, q {kind.q_value:.2g}"
        )
    if not drew:
        click.echo("note: no picture (no steps, or matplotlib is not installed)")


feedback.add_command(replay_command)
feedback.add_command(accept_command)

if __name__ == "__main__":
    feedback()
