"""`dataclean feedback accept`: apply `review` entries of a quarantine list, or a kind whole.

`dataclean feedback` lists persistent outliers with action `review`: listed for a person, applied
by neither `dataclean run --quarantine` nor the training sampler. After reading the report (its
"Kinds of samples that keep losing"), a person accepts:

- entries by sample id or by reason (`--id`, `--reason`, `--all`): those `review` entries are set
  to `drop` (default) or `downweight`;
- a kind whole (`--group COLUMN=VALUE --corpus OUT`, the group as the report names it:
  `source=forum`, `url_host=x.org`, `quality_tiny=0-0.2`): every row of that group in the corpus
  goes on the list (by id and text hash, reason `kind:COLUMN=VALUE`), so the next run leaves the
  whole group out (or down-weights it), not only its worst rows. The rows are counted and shown
  before anything is written (`--dry-run` stops there).

Entries already applied are never weakened (`drop` stays `drop`); the list is rewritten
atomically. Every acceptance is recorded, with its rule and counts, in `NAME.accepted.jsonl`
beside the list (the review's record of which kinds were accepted and how).

    dataclean feedback accept feedback/quarantine.parquet --group source=forum --corpus OUT --as drop
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click
import pyarrow as pa
import pyarrow.dataset as ds

from dataclean import columns as C
from dataclean.errors import ConfigError, InputError
from dataclean.feedback.analysis.groups import URL, URL_HOST, column_values, group_labels
from dataclean.feedback.corpus import corpus_files
from dataclean.ids import text_hashes
from dataclean.quarantine.lists import make_list, merge_lists, read_list, write_list

REVIEW = "review"


def group_rows(corpus: str | Path, column: str, value: str) -> pa.Table:
    """(id, text_hash) of the corpus rows in group `column` = `value`, as `groups.group_labels`
    labels them (the text hash computed from the text when the corpus has none)."""
    dataset = ds.dataset(corpus_files(corpus), format="parquet")
    names = dataset.schema.names
    source = URL if column == URL_HOST else column.partition(".")[0]
    if source not in names or column_values(dataset.schema.empty_table(), column) is None:
        raise InputError(str(corpus), f"the corpus has no column {column!r} to group by")
    hashed = C.TEXT_HASH if C.TEXT_HASH in names else C.TEXT
    table = dataset.to_table(columns=list(dict.fromkeys([C.ID, hashed, source])))
    labels = group_labels(table, column)
    if labels is None:
        raise InputError(str(corpus), f"column {column!r} is not grouped (a struct or a list)")
    rows = table.filter(pa.array([label == value for label in labels.to_pylist()], pa.bool_()))
    hashes = rows.column(C.TEXT_HASH) if hashed == C.TEXT_HASH else text_hashes(rows.column(C.TEXT))
    return pa.table({C.ID: rows.column(C.ID), C.TEXT_HASH: hashes})


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


def accept_group(
    table: pa.Table, group: pa.Table, name: str, action: str = "drop", weight: float = 0.1
) -> tuple[pa.Table, int, int]:
    """The list with every row of `group` (`group_rows`) applied as `action`: its `review`
    entries set, its other rows added with reason `kind:NAME`. Returns the list, the rows added
    and the review entries changed."""
    members = set(group.column(C.ID).to_pylist())
    updated, changed = accept(table, members=members, action=action, weight=weight)
    listed = set(updated.column(C.SAMPLE_ID).to_pylist())
    entries = [
        {
            C.SAMPLE_ID: sample_id,
            C.TEXT_HASH: digest,
            C.REASON: f"kind:{name}",
            C.ACTION: action,
            C.WEIGHT: 0.0 if action == "drop" else weight,
            C.SOURCE: "accept",
        }
        for sample_id, digest in zip(
            group.column(C.ID).to_pylist(), group.column(C.TEXT_HASH).to_pylist(), strict=True
        )
        if sample_id not in listed
    ]
    return merge_lists(updated, make_list(entries)), len(entries), changed


def record(list_path: Path, entry: dict[str, Any]) -> Path:
    """Append one acceptance to `NAME.accepted.jsonl` beside the list."""
    path = list_path.with_name(f"{list_path.stem}.accepted.jsonl")
    entry = {"time": datetime.now(timezone.utc).isoformat(timespec="seconds"), **entry}
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry, ensure_ascii=False) + "\n")
    return path


@click.command("accept")
@click.argument("list_path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--id", "ids", multiple=True, help="A sample id to accept (repeatable).")
@click.option(
    "--reason", "reasons", multiple=True, help="Accept entries with this reason, e.g. loss_outlier."
)
@click.option(
    "--group", "groups", multiple=True, help="COLUMN=VALUE: every corpus row of that kind (needs --corpus)."
)
@click.option("--corpus", type=click.Path(exists=True, path_type=Path), help="The corpus, for --group.")
@click.option("--as", "action", type=click.Choice(["drop", "downweight"]), default="drop", show_default=True)
@click.option("--weight", default=0.1, show_default=True, help="Weight of down-weighted samples.")
@click.option("--all", "everything", is_flag=True, help="Accept every review entry.")
@click.option("--dry-run", is_flag=True, help="Count and show what would be accepted; write nothing.")
def accept_command(
    list_path: Path,
    ids: tuple[str, ...],
    reasons: tuple[str, ...],
    groups: tuple[str, ...],
    corpus: Path | None,
    action: str,
    weight: float,
    everything: bool,
    dry_run: bool,
) -> None:
    """Apply review entries of a quarantine list (by id or reason), or kinds whole (by group)."""
    if not (ids or reasons or groups or everything):
        raise click.UsageError("say what to accept: --id, --reason, --group or --all")
    if groups and corpus is None:
        raise click.UsageError("--group needs --corpus (the corpus the list's ids come from)")
    table = read_list(list_path)
    done: list[dict[str, Any]] = []
    if ids or reasons or everything:
        table, changed = accept(table, set(ids) or None, set(reasons) or None, action=action, weight=weight)
        click.echo(f"{changed} review entries accepted as {action}")
        rule = "every review entry" if everything else "review entries by id or reason"
        done.append({"rule": rule, "ids": list(ids), "reasons": list(reasons), "entries": changed})
    for group in groups:
        column, _, value = group.partition("=")
        if not value:
            raise click.UsageError(f"--group {group!r}: write COLUMN=VALUE")
        assert corpus is not None
        rows = group_rows(corpus, column, value)
        table, added, changed = accept_group(table, rows, group, action=action, weight=weight)
        shown = ", ".join(rows.column(C.ID).to_pylist()[:5])
        click.echo(
            f"{group}: {rows.num_rows} rows in the corpus ({shown}{', ...' if rows.num_rows > 5 else ''}): "
            f"{added} added to the list, {changed} review entries accepted, as {action}"
            + (f" (weight {weight:g})" if action == "downweight" else "")
        )
        done.append(
            {"rule": "whole kind", "group": group, "rows": rows.num_rows, "added": added, "entries": changed}
        )
    if dry_run:
        click.echo("dry run: nothing written")
        return
    write_list(table, list_path)
    for entry in done:
        record(list_path, {**entry, "action": action, "weight": 0.0 if action == "drop" else weight})
    left = sum(1 for a in table.column(C.ACTION).to_pylist() if a == REVIEW)
    click.echo(f"{table.num_rows} entries in {list_path}, {left} left to review")
