"""Dropped rows per reason kind and language: which rule drops what in each language.

Reads only `reason` and `lang` of `excluded/` and `quarantined/`, one row group at a time. Rows
dropped before the `language` stage ran have no label and count as `(none)`.
"""

from __future__ import annotations

import pyarrow as pa

from dataclean import columns as C
from dataclean.io.layout import EXCLUDED, QUARANTINED
from dataclean.report.languages import NONE
from dataclean.report.scan import Output, reason_kinds, tables


def drops_by_language(output: Output) -> dict[str, dict[str, int]]:
    """{reason kind: {language: rows}}; empty when nothing was dropped."""
    found: dict[str, dict[str, int]] = {}
    files = output.files.get(EXCLUDED, []) + output.files.get(QUARANTINED, [])
    for table in tables(files, [C.REASON, C.LANG]):
        if C.REASON not in table.column_names:
            continue
        kinds = reason_kinds(table.column(C.REASON))
        if C.LANG in table.column_names:
            langs = table.column(C.LANG).cast(pa.string()).fill_null(NONE)
        else:
            langs = pa.chunked_array([pa.array([NONE] * table.num_rows, pa.string())])
        grouped = (
            pa.table({"kind": kinds, "lang": langs}).group_by(["kind", "lang"]).aggregate([("kind", "count")])
        )
        for kind, lang, count in zip(
            *(grouped[c].to_pylist() for c in ("kind", "lang", "kind_count")), strict=True
        ):
            per = found.setdefault(str(kind), {})
            per[str(lang)] = per.get(str(lang), 0) + int(count)
    return found
