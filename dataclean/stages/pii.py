"""Stage `pii`: replace personal data (emails, public IPs, phones, ID and card numbers) with placeholders.

`redact_text` (in `dataclean.text.pii`, where the kinds and their checks are documented) is the
pure function; `RedactPersonalData` applies it to a batch: one RE2 screen over the whole text
column picks the rows that may hold something (most web rows hold nothing), and only those go
through the compiled Python pattern, whose matches are validated (public IP, GB 11643 check
character, Luhn) before they are replaced. The stage never drops a row.

It adds `pii_redacted` (int32: spans replaced in the row) and counts each kind in stats.json
(`counts`: `email`, `ip`, `phone`, `id_number`, `card`). It runs right after `clean` and is a
redacting stage (`Outputs.redacts`): rows that the reader or `clean` exclude are redacted the same way
before they are written to OUT/excluded/, so no file of the run (nor the report's excerpts, which
are read from those files) holds the personal data.

Compared with datatrove's `PIIFormatter` (emails and IPv4 only, the same email pattern, the same
public-IP rule), it adds IPv6, phone, ID and card numbers, finds emails written right after
Chinese characters, and leaves version strings such as `v1.2.3.4` alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean import columns as C
from dataclean.errors import ConfigError
from dataclean.stage import Outputs, Stage, with_column, with_counts
from dataclean.text.pii import KINDS, PLACEHOLDERS, Redactor


def _redacted(
    redactor: Redactor, texts: pa.ChunkedArray | pa.Array
) -> tuple[pa.Array, dict[str, np.ndarray]]:
    """New texts and per-row counts per kind; only screened rows become Python strings."""
    rows = len(texts)
    counts = {kind: np.zeros(rows, dtype=np.int32) for kind in redactor.kinds}
    array = texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts
    candidates = redactor.candidates(array)
    if len(candidates) == 0:
        return array, counts
    replaced, changed = [], []
    for row, text in zip(candidates.tolist(), array.take(pa.array(candidates)).to_pylist(), strict=True):
        new, found = redactor.redact(text)
        if found:
            changed.append(row)
            replaced.append(new)
            for kind, count in found.items():
                counts[kind][row] = count
    if not changed:
        return array, counts
    mask = np.zeros(rows, dtype=bool)
    mask[changed] = True
    return pc.replace_with_mask(array, pa.array(mask), pa.array(replaced, array.type)), counts


@dataclass
class RedactPersonalData(Stage):
    """Replace personal data with typed placeholders; add `pii_redacted` (see the module docstring).

    `kinds`: what to find (any of email, ip, phone, id_number, card). The placeholders: one field
    per kind (`--set pii.email_placeholder=[email]`).
    """

    name: ClassVar[str] = "pii"
    provides: ClassVar[tuple[str, ...]] = (C.PII_REDACTED,)
    outputs: ClassVar[Outputs] = Outputs(redacts=True)

    kinds: tuple[str, ...] = KINDS
    email_placeholder: str = PLACEHOLDERS["email"]
    ip_placeholder: str = PLACEHOLDERS["ip"]
    phone_placeholder: str = PLACEHOLDERS["phone"]
    id_number_placeholder: str = PLACEHOLDERS["id_number"]
    card_placeholder: str = PLACEHOLDERS["card"]
    _redactor: Redactor | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.kinds = tuple(kind.strip() for kind in self.kinds if kind.strip())
        unknown = [kind for kind in self.kinds if kind not in KINDS]
        if unknown:
            raise ConfigError(f"pii.kinds: unknown kind {unknown[0]!r} (known: {', '.join(KINDS)})")
        for kind in KINDS:
            if not getattr(self, f"{kind}_placeholder"):
                raise ConfigError(f"pii.{kind}_placeholder must not be empty")

    @property
    def redactor(self) -> Redactor:
        """The compiled patterns, built on first use in each process."""
        if self._redactor is None:
            placeholders = {kind: getattr(self, f"{kind}_placeholder") for kind in KINDS}
            self._redactor = Redactor(self.kinds, placeholders)
        return self._redactor

    def setup(self) -> None:
        """Compile the patterns once per worker."""
        _ = self.redactor

    def __call__(self, table: pa.Table) -> pa.Table:
        table, counts = self._redact(table)
        return with_counts(table, counts)

    def redact(self, table: pa.Table) -> pa.Table:
        """Rows others dropped, as they are written: the text redacted, `pii_redacted` added
        (their spans are not counted in this stage's stats: the rows never reached it)."""
        return self._redact(table)[0] if C.TEXT in table.column_names else table

    def _redact(self, table: pa.Table) -> tuple[pa.Table, dict[str, np.ndarray]]:
        texts, counts = _redacted(self.redactor, table.column(C.TEXT))
        table = table.set_column(table.schema.get_field_index(C.TEXT), C.TEXT, texts)
        total = sum(counts.values(), np.zeros(table.num_rows, dtype=np.int32))
        return with_column(table, C.PII_REDACTED, pa.array(total, pa.int32())), counts

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["_redactor"] = None  # compiled patterns are rebuilt on the worker
        return state
