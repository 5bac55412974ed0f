"""A few text excerpts of the rows dropped for each reason, chosen by id hash.

Per reason kind (`clean:garbage`, `dedup:exact_of`, ...) the rows with the smallest id hashes are
taken: a uniform sample that is the same on every rerun, whatever the shard or worker count. The
first pass reads only ids and reasons; the second reads the text of the row groups that hold a
chosen row, one row group at a time. An excerpt is a window of the text around what the reason
points at (`dataclean.report.evidence`: the control character, the repetition run, the blob),
and for the clean stage's drops, whose text is kept as it came in, also what cleaning made of it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc

from dataclean import columns as C
from dataclean.io.layout import EXCLUDED, QUARANTINED
from dataclean.report.evidence import evidence_span, window
from dataclean.report.scan import Output, id_hashes, reason_kinds, tables
from dataclean.stage import reason_kind
from dataclean.text.cleaning import clean_text


@dataclass(frozen=True)
class Excerpt:
    """A window of one dropped row's text: `text` starts at character `start` of the whole text,
    `length` characters long; `evidence` is where the reason is, in `text` (start, end), if it
    points at a place; `cleaned` is `text` after the clean stage's cleaning, for the clean stage's
    drops where that differs."""

    id: str
    reason: str
    text: str | None
    length: int
    start: int = 0
    evidence: tuple[int, int] | None = None
    cleaned: str | None = None

    @property
    def truncated(self) -> bool:
        return self.text is not None and (self.start > 0 or self.length > self.start + len(self.text))


def make_excerpt(row_id: str, reason: str, text: str | None, max_chars: int) -> Excerpt:
    """The excerpt of one dropped row (see `Excerpt`)."""
    if text is None:
        return Excerpt(row_id, reason, None, 0)
    kind = reason_kind(reason)
    span = evidence_span(kind, text)
    start, stop = window(len(text), span, max_chars)
    shown = text[start:stop]
    evidence = (span[0] - start, min(span[1], stop) - start) if span is not None else None
    cleaned = clean_text(shown) if kind.startswith("clean:") else None
    return Excerpt(row_id, reason, shown, len(text), start, evidence, cleaned if cleaned != shown else None)


@dataclass(frozen=True)
class _Pick:
    hash: int
    path: str
    group: int
    row: int


def _choose(output: Output, folder: str, per_reason: int) -> dict[str, list[_Pick]]:
    """Per reason kind, the `per_reason` rows of `folder` with the smallest id hashes."""
    chosen: dict[str, list[_Pick]] = {}
    for path in output.files.get(folder, []):
        for group, table in enumerate(tables([path], [C.ID, C.REASON])):
            if C.REASON not in table.column_names or C.ID not in table.column_names:
                continue
            hashes = id_hashes(table.column(C.ID))
            encoded = pc.dictionary_encode(reason_kinds(table.column(C.REASON))).combine_chunks()
            indices = encoded.indices.to_numpy(zero_copy_only=False)
            for code, kind in enumerate(encoded.dictionary.to_pylist()):
                rows = np.flatnonzero(indices == code)
                if len(rows) > per_reason:
                    rows = rows[np.argpartition(hashes[rows], per_reason)[:per_reason]]
                picks = chosen.setdefault(kind, [])
                picks.extend(_Pick(int(hashes[r]), path, group, int(r)) for r in rows)
                picks.sort(key=lambda pick: pick.hash)
                del picks[per_reason:]
    return chosen


def sample_excerpts(output: Output, per_reason: int = 3, max_chars: int = 300) -> dict[str, list[Excerpt]]:
    """Up to `per_reason` excerpts of at most `max_chars` characters per drop reason kind."""
    excerpts: dict[str, list[Excerpt]] = {}
    for folder in (EXCLUDED, QUARANTINED):
        chosen = _choose(output, folder, per_reason)
        by_group: dict[tuple[str, int], list[int]] = {}
        for picks in chosen.values():
            for pick in picks:
                by_group.setdefault((pick.path, pick.group), []).append(pick.row)
        found: dict[tuple[str, int, int], Excerpt] = {}
        for (path, group), rows in sorted(by_group.items()):
            [table] = list(tables([path], [C.ID, C.REASON, C.TEXT], {path: [group]}))
            table = table.take(rows)
            texts = table.column(C.TEXT).to_pylist() if C.TEXT in table.column_names else [None] * len(rows)
            ids = table.column(C.ID).to_pylist()
            reasons = table.column(C.REASON).to_pylist()
            for i, row in enumerate(rows):
                found[(path, group, row)] = make_excerpt(str(ids[i]), str(reasons[i]), texts[i], max_chars)
        for kind, picks in chosen.items():
            excerpts.setdefault(kind, []).extend(found[(p.path, p.group, p.row)] for p in picks)
    return excerpts
