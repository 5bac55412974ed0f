"""Plan a run: cut the stages into groups at each barrier, and check the column contract.

A group runs its row-local stages over every shard in parallel and ends with the next barrier's
`observe`; the driver then calls the barrier's `fit`, and the next group starts by applying it.
The columns are checked before any row is read (`check_columns`), against what the reader gives,
what the inputs carry and what each earlier stage provides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from dataclean import columns as C
from dataclean.errors import ConfigError
from dataclean.io.readers import parquet_columns
from dataclean.io.shards import Shard
from dataclean.stage import GlobalStage, Stage

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
