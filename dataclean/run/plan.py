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
from dataclean.io.readers import ReadOptions, carried_columns
from dataclean.io.shards import Shard
from dataclean.stage import GlobalStage, Stage

# The columns every batch has when it leaves the reader (`dataclean.io.readers`).
READER_COLUMNS = (C.ID, C.TEXT, C.PARENT_ID, C.BAD_BYTES)
# The columns the final step gives the kept rows after every stage (`dataclean.run.routing.finalize`):
# `text_hash` is its own (no stage provides it); `weight` and `dup_cluster` it completes with their
# neutral value where no stage (quarantine, dedup) provided them.
FINAL_COLUMNS = (C.TEXT_HASH, C.WEIGHT, C.DUP_CLUSTER)
FINAL_ONLY = (C.TEXT_HASH,)


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


def input_columns(shards: Sequence[Shard], options: ReadOptions) -> tuple[str, ...]:
    """The columns the inputs carry, as far as planning knows them without reading a batch: the
    first shard's (its Parquet footer, or a JSONL file's first record; none for text), e.g. a
    previous run's OUT/data to re-run its filters, or a corpus with its own `lang`."""
    if not shards:
        return ()
    return tuple(carried_columns(shards[0], options))


def check_columns(stages: Sequence[Stage], given: Sequence[str] = ()) -> None:
    """The column contract of a recipe, each failure a `ConfigError` of one line naming the stage
    and the column (docs/contracts.md, "Rows and columns"):

    - every column a stage requires (`Stage.required_columns`, which may depend on its
      parameters: `dedup.keep=-ppl` needs `ppl`) is the reader's (`READER_COLUMNS`), one the
      inputs carry (`given`, see `input_columns`) or one a stage before it provides;
    - a column a stage reads when present (`Stage.optional_columns`: dedup shingles by `lang`)
      is not provided by a stage after it (the stage would run without what it was meant to read);
    - every column has one producer: the reader, a stage, or the final step (`FINAL_COLUMNS`,
      `dataclean.run.routing.finalize`: `text_hash` always; `weight` and `dup_cluster` only where
      no stage gave them). A stage may provide a column the input carries: the language stage
      keeps an input `lang` (labelling only its empty rows), perplexity an input `ppl` (unless
      `rescore`), dedup replaces its columns.
    """
    producers: dict[str, str] = {}
    for position, stage in enumerate(stages):
        for column in stage.required_columns():
            if column not in READER_COLUMNS and column not in given and column not in producers:
                known = _producers_of(column)
                hint = f" (add the {' or '.join(known)} stage before it)" if known else ""
                raise ConfigError(
                    f"stage {stage.name!r} needs column {column!r}, which no stage before it provides{hint}"
                )
        for column in stage.optional_columns():
            later = next((s.name for s in stages[position + 1 :] if column in s.provided_columns()), None)
            if later is not None and column not in producers and column not in given:
                raise ConfigError(
                    f"stage {stage.name!r} reads column {column!r} when present, but stage {later!r} "
                    "provides it only after it: put that stage first"
                )
        for column in stage.provided_columns():
            if column in READER_COLUMNS or column in producers or column in FINAL_ONLY:
                first = (
                    "the reader"
                    if column in READER_COLUMNS
                    else "the final step"
                    if column in FINAL_ONLY
                    else f"stage {producers[column]!r}"
                )
                raise ConfigError(
                    f"stage {stage.name!r} provides column {column!r}, which {first} provides already: "
                    "a column has one producer"
                )
            producers[column] = stage.name
