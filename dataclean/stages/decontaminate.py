"""Stage `decontaminate`: rows that overlap the user's evaluation sets are dropped, cut or marked.

Off until eval sets are named (`--set decontaminate.evals=NAME=PATH_OR_URI,...`, see
`dataclean.contamination.evalsets`). `prepare` builds the n-gram index of the eval sets once per
run on the driver (`dataclean.contamination.index`); every worker opens its files. A corpus row is
contaminated when it shares at least `min_ngrams` n-grams with the eval items (GPT-3 and
lm-evaluation-harness: one 13-gram): word `word_ngram`-grams (13) and, for Chinese and other
unsegmented text, character `char_ngram`-grams (10: a 24-character question edited once anywhere
still leaves at least 5 of its 15 10-grams whole; with 13, one edit in the middle leaves none;
docs/decontaminate.md has the measurements). Texts are normalized as dedup normalizes them.

`mode`:
- `drop` (default): the row is excluded, reason `decontaminate:<eval set>` (the set with the most
  matched n-grams);
- `remove`: the matched n-grams are cut out with `margin` characters around each (GPT-3's 200),
  pieces under `min_piece_chars` go, and a row cut into more than `max_pieces` pieces or left
  empty is dropped as above (`dataclean.contamination.removal`);
- `annotate`: rows are kept as they are.
In every mode the stage adds `contamination_ngrams` (int32) and `contaminated_by` (the eval sets,
most matched first; null for a clean row), and records each (row, eval item) pair in
`OUT/contamination.parquet` (`id`, `eval_set`, `eval_item`, `matched_ngrams`).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import pyarrow as pa

from dataclean import columns as C
from dataclean.contamination.evalsets import parse_eval_sets
from dataclean.contamination.index import Hits, Index, IndexSummary, build_index
from dataclean.contamination.ngrams import ngram_hashes
from dataclean.contamination.removal import cut_spans, token_spans
from dataclean.errors import ConfigError
from dataclean.io.layout import CONTAMINATION
from dataclean.stage import Outputs, Records, Stage, with_drops, with_records

Mode = Literal["drop", "remove", "annotate"]
RECORD = pa.struct([("eval_set", pa.string()), ("eval_item", pa.string()), ("matched_ngrams", pa.int32())])


@dataclass
class DropContaminated(Stage):
    """Find rows sharing n-grams with the eval sets; drop, cut or mark them (module docstring)."""

    name: ClassVar[str] = "decontaminate"
    outputs: ClassVar[Outputs] = Outputs(records=Records(CONTAMINATION, pa.schema(list(RECORD))))

    evals: tuple[str, ...] = ()
    fields: tuple[str, ...] = ()
    mode: Mode = "drop"
    word_ngram: int = 13
    char_ngram: int = 10
    min_ngrams: int = 1
    margin: int = 200
    min_piece_chars: int = 200
    max_pieces: int = 10
    _summary: IndexSummary | None = field(default=None, init=False, repr=False, compare=False)
    _index: Index | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        parse_eval_sets(self.evals)  # names and forms, before any file is read
        if self.mode not in ("drop", "remove", "annotate"):
            raise ConfigError(f"decontaminate.mode must be drop, remove or annotate, got {self.mode!r}")
        for name in ("word_ngram", "char_ngram", "min_ngrams", "max_pieces"):
            if getattr(self, name) < 1:
                raise ConfigError(f"decontaminate.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("margin", "min_piece_chars"):
            if getattr(self, name) < 0:
                raise ConfigError(f"decontaminate.{name} must be >= 0, got {getattr(self, name)}")

    def provided_columns(self) -> tuple[str, ...]:
        return (C.CONTAMINATION_NGRAMS, C.CONTAMINATED_BY) if self.evals else ()

    def prepare(self, scratch: str) -> None:
        """Build the eval sets' n-gram index under `scratch` (once per run, on the driver)."""
        if self.evals:
            self._summary = build_index(
                parse_eval_sets(self.evals),
                self.fields,
                self.word_ngram,
                self.char_ngram,
                posixpath.join(scratch, "index"),
            )

    @property
    def summary(self) -> IndexSummary | None:
        """What `prepare` indexed (items per eval set), or None before it ran."""
        return self._summary

    def setup(self) -> None:
        if self.evals and self._summary is not None:
            self._index = Index(self._summary.folder)

    def __call__(self, table: pa.Table) -> pa.Table:
        if not self.evals:
            return table
        if self._index is None:
            if self._summary is None:
                raise ConfigError("decontaminate: the eval index was not built (call prepare(scratch) first)")
            self._index = Index(self._summary.folder)
        index = self._index
        found = ngram_hashes(table.column(C.TEXT), self.word_ngram, self.char_ngram)
        hits = index.lookup(found, table.num_rows)
        contaminated = hits.row_ngrams >= self.min_ngrams
        by_set, records = self._per_row(hits, index, contaminated, table.num_rows)
        table = table.append_column(C.CONTAMINATION_NGRAMS, pa.array(hits.row_ngrams.astype(np.int32)))
        table = table.append_column(C.CONTAMINATED_BY, pa.array(by_set, pa.string()))
        table = with_records(table, pa.array(records, pa.list_(RECORD)))
        reasons: list[str | None] = [names.split(",")[0] if names else None for names in by_set]
        if self.mode == "annotate":
            return table
        if self.mode == "remove":
            table, reasons = self._remove(table, reasons, index)
        return with_drops(table, reasons)

    def _per_row(
        self, hits: Hits, index: Index, contaminated: np.ndarray, rows: int
    ) -> tuple[list[str | None], list[list[dict[str, Any]] | None]]:
        """Per row: its eval sets (most matched first), and its (eval set, item, n-grams) records."""
        by_set: list[str | None] = [None] * rows
        records: list[list[dict[str, Any]] | None] = [None] * rows
        keep = contaminated[hits.rows]
        pair_rows, items, counts = hits.rows[keep], hits.items[keep], hits.ngrams[keep]
        if len(pair_rows) == 0:
            return by_set, records
        sets = index.item_sets[items]
        ids = index.item_ids.take(pa.array(items)).to_pylist()
        for row, item_set, item_id, count in zip(
            pair_rows.tolist(), sets.tolist(), ids, counts.tolist(), strict=True
        ):
            row_records = records[row] if records[row] is not None else []
            row_records.append(
                {"eval_set": index.set_names[item_set], "eval_item": item_id, "matched_ngrams": count}
            )
            records[row] = row_records
        for row, row_records in enumerate(records):
            if row_records:
                row_records.sort(key=lambda record: -record["matched_ngrams"])
                totals: dict[str, int] = {}
                for record in row_records:
                    totals[record["eval_set"]] = totals.get(record["eval_set"], 0) + record["matched_ngrams"]
                by_set[row] = ",".join(sorted(totals, key=lambda name: -totals[name]))
        return by_set, records

    def _remove(
        self, table: pa.Table, reasons: list[str | None], index: Index
    ) -> tuple[pa.Table, list[str | None]]:
        """Cut the matched spans out of contaminated rows; rows left with nothing keep their reason."""
        texts = table.column(C.TEXT).to_pylist()
        kept_reasons: list[str | None] = [None] * len(reasons)
        for row, reason in enumerate(reasons):
            if reason is None:
                continue
            tokens, spans = token_spans(texts[row])
            found = ngram_hashes([" ".join(tokens)], self.word_ngram, self.char_ngram, normalized=True)
            matched = index.lookup(found, 1).matched
            cuts = [
                (spans[a][0], spans[b][1])
                for a, b in zip(found.first[matched], found.last[matched], strict=True)
            ]
            cut = cut_spans(texts[row], cuts, self.margin, self.min_piece_chars, self.max_pieces)
            if cut is None:
                kept_reasons[row] = reason
            else:
                texts[row] = cut
        position = table.schema.get_field_index(C.TEXT)
        return table.set_column(
            position, C.TEXT, pa.array(texts, table.schema.field(C.TEXT).type)
        ), kept_reasons

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["_index"] = None  # each worker opens (memory-maps) the index files itself
        return state
