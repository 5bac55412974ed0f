"""`dataclean feedback replay --step N`: the samples of step N, their losses and texts.

    dataclean feedback replay --step N --losses LOG [--corpus OUT] [--rank R] [-o FILE]

Prints one line per sample, highest loss first (id, loss, tokens, the start of its text), and
with `-o` writes every column and the whole texts to FILE (.parquet, or .jsonl).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import click
import pyarrow.parquet as pq

from dataclean import columns as C
from dataclean.errors import DatacleanError
from dataclean.feedback.analysis.replay import replay


def _excerpt(text: str | None, width: int) -> str:
    if text is None:
        return "(not in the corpus)"
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


@click.command("replay")
@click.option("--step", required=True, type=int, help="The training step to show.")
@click.option(
    "--losses", required=True, type=click.Path(exists=True), help="Per-sample loss log (file or folder)."
)
@click.option(
    "--corpus", type=click.Path(exists=True), help="The dataclean output the training read (OUT or OUT/data)."
)
@click.option("--rank", type=int, help="Only this rank's samples.")
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False), help="Write the rows to FILE (.parquet or .jsonl)."
)
@click.option("--width", default=80, show_default=True, help="Characters of text shown per sample.")
def replay_command(
    step: int, losses: str, corpus: str | None, rank: int | None, output: str | None, width: int
) -> None:
    """Show the samples of one training step with their losses (and texts, with --corpus)."""
    try:
        found = replay(losses, step, corpus, rank)
    except DatacleanError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(error.exit_code)
    rows = found.rows.to_pylist()
    if not rows:
        click.echo(f"error: step {step} is not in the loss log {losses}", err=True)
        sys.exit(2)
    click.echo(f"step {step}: {len(rows)} samples, highest loss first")
    for row in rows:
        loss = row[C.LOSS]
        shown = "nan" if loss is None or math.isnan(loss) else f"{loss:.4g}"
        rank_part = "" if row[C.RANK] is None else f"r{row[C.RANK]} "
        tokens = "" if row[C.TOKENS] is None else f" {row[C.TOKENS]} tok"
        text = _excerpt(row[C.TEXT], width) if corpus else ""
        click.echo(f"  {rank_part}{row[C.SAMPLE_ID]}  loss {shown}{tokens}  {text}".rstrip())
    if found.missing_texts:
        click.echo(f"note: {len(found.missing_texts)} of these ids are not in the corpus")
    if output:
        target = Path(output)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.suffix == ".jsonl":
            with open(target, "w", encoding="utf-8") as handle:
                for row in rows:
                    handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        else:
            pq.write_table(found.rows, target)
        click.echo(f"wrote {len(rows)} rows to {target}")
