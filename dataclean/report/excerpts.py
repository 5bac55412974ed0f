"""A few text excerpts of the rows dropped for each reason, chosen by id hash.

Per reason kind (`clean:garbage`, `dedup:exact_of`, ...) the rows with the smallest id hashes are
taken: a uniform sample that is the same on every rerun, whatever the shard or worker count. The
first pass reads only ids and reasons; the second reads the text of the row groups that hold a
chosen row, one row group at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc

from dataclean import columns as C
from dataclean.io.layout import EXCLUDED, QUARANTINED
from dataclean.report.scan import Output, id_hashes, reason_kinds, tables


@dataclass(frozen=True)
class Excerpt:
    """The start of one dropped row's text; `length` is the whole text's length in characters."""

    id: str
    reason: str
    text: str | None
    length: int

    @property
    def truncated(self) -> bool:
        return self.text is not None and self.length > len(self.text)


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
            if C.TEXT in table.column_names:
                texts = table.column(C.TEXT)
                starts = pc.utf8_slice_codeunits(texts, 0, max_chars).to_pylist()
                lengths = pc.utf8_length(texts).fill_null(0).to_pylist()
            else:
                starts, lengths = [None] * len(rows), [0] * len(rows)
            ids = table.column(C.ID).to_pylist()
            reasons = table.column(C.REASON).to_pylist()
            for i, row in enumerate(rows):
                found[(path, group, row)] = Excerpt(str(ids[i]), str(reasons[i]), starts[i], int(lengths[i]))
        for kind, picks in chosen.items():
            excerpts.setdefault(kind, []).extend(found[(p.path, p.group, p.row)] for p in picks)
    return excerpts
