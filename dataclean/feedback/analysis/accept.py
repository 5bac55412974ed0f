"""`dataclean feedback accept`: turn `review` entries of a quarantine list into applied ones.

`dataclean feedback` lists persistent outliers with action `review`: listed for a person, applied
by neither `dataclean run --quarantine` nor the training sampler. After reading the report (its
"Kinds of samples that keep losing"), a person accepts some of them, by sample id, by reason, or
by group (a corpus column's value, as the report names it: `source=forum`, `url_host=x.org`,
`ppl_bucket=tail`; needs `--corpus`), as `drop` (default) or `downweight`. Entries that are not
`review` are never changed; the list is rewritten atomically.

    dataclean feedback accept feedback/quarantine.parquet --group source=forum --corpus OUT
"""

from __future__ import annotations

from pathlib import Path

import click
import pyarrow as pa
import pyarrow.dataset as ds

from dataclean import columns as C
from dataclean.errors import ConfigError, InputError
from dataclean.feedback.analysis.kinds import group_labels
from dataclean.feedback.corpus import corpus_files
from dataclean.quarantine.lists import read_list, write_list

REVIEW = "review"


def group_members(corpus: str | Path, column: str, value: str) -> set[str]:
    """Ids of the corpus rows in group `column` = `value` (as `kinds.group_labels` labels it)."""
    dataset = ds.dataset(corpus_files(corpus), format="parquet")
    source = "url" if column == "url_host" else column
    if source not in dataset.schema.names:
        raise InputError(str(corpus), f"the corpus has no column {source!r} to group by")
    table = dataset.to_table(columns=[C.ID, source])
    labels = group_labels(table, column)
    assert labels is not None
    return {
        i
        for i, label in zip(table.column(C.ID).to_pylist(), labels.to_pylist(), strict=True)
        if label == value
    }


def accept(
    table: pa.Table,
    ids: set[str] | None = None,
    reasons: set[str] | None = None,
    members: set[str] | None = None,
    action: str = "drop",
    weight: float = 0.1,
) -> tuple[pa.Table, int]:
    """The list with the `review` entries that match every given selector (ids, reasons, group
    members; none given: all) set to `action`; and how many were changed."""
    if action not in ("drop", "downweight"):
        raise ConfigError(f"accept --as: {action!r} is not drop or downweight")
    rows = table.to_pylist()
    changed = 0
    for row in rows:
        if row[C.ACTION] != REVIEW:
            continue
        if ids is not None and row[C.SAMPLE_ID] not in ids:
            continue
        if reasons is not None and row[C.REASON] not in reasons:
            continue
        if members is not None and row[C.SAMPLE_ID] not in members:
            continue
        row[C.ACTION] = action
        row[C.WEIGHT] = 0.0 if action == "drop" else weight
        changed += 1
    return pa.Table.from_pylist(rows, schema=table.schema), changed


@click.command("accept")
@click.argument("list_path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--id", "ids", multiple=True, help="A sample id to accept (repeatable).")
@click.option(
    "--reason", "reasons", multiple=True, help="Accept entries with this reason, e.g. loss_outlier."
)
@click.option("--group", "groups", multiple=True, help="COLUMN=VALUE of the corpus (needs --corpus).")
@click.option("--corpus", type=click.Path(exists=True, path_type=Path), help="The corpus, for --group.")
@click.option("--as", "action", type=click.Choice(["drop", "downweight"]), default="drop", show_default=True)
@click.option("--weight", default=0.1, show_default=True, help="Weight of down-weighted samples.")
@click.option("--all", "everything", is_flag=True, help="Accept every review entry.")
def accept_command(
    list_path: Path,
    ids: tuple[str, ...],
    reasons: tuple[str, ...],
    groups: tuple[str, ...],
    corpus: Path | None,
    action: str,
    weight: float,
    everything: bool,
) -> None:
    """Apply review entries of a quarantine list (by id, reason or group) as drop or downweight."""
    if not (ids or reasons or groups or everything):
        raise click.UsageError("say what to accept: --id, --reason, --group or --all")
    members: set[str] | None = None
    for group in groups:
        column, _, value = group.partition("=")
        if not value:
            raise click.UsageError(f"--group {group!r}: write COLUMN=VALUE")
        if corpus is None:
            raise click.UsageError("--group needs --corpus (the corpus the list's ids come from)")
        found = group_members(corpus, column, value)
        members = found if members is None else members & found
    table = read_list(list_path)
    updated, changed = accept(
        table, set(ids) or None, set(reasons) or None, members, action=action, weight=weight
    )
    write_list(updated, list_path)
    left = sum(1 for a in updated.column(C.ACTION).to_pylist() if a == REVIEW)
    click.echo(f"accepted {changed} review entries as {action}; {left} left to review in {list_path}")
