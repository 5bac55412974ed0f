"""The language codes lid.176 labels with, for checking a user's codes before a run starts.

`dataclean/data/lang/lid176_labels.txt` lists the model's 176 labels (its own order; a test
checks the file against the model), `iso639_3_to_lid176.tsv` the ISO 639-2/3 codes of the
languages it labels with a 2-letter code, so that `eng` can be answered with `en`.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

UNKNOWN = "und"


def _data(name: str) -> str:
    return (resources.files("dataclean") / "data" / "lang" / name).read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def lid176_labels() -> tuple[str, ...]:
    """lid.176's labels, in the model's order."""
    return tuple(line.strip() for line in _data("lid176_labels.txt").splitlines() if line.strip())


@lru_cache(maxsize=1)
def _three_letter() -> dict[str, tuple[str, str]]:
    table: dict[str, tuple[str, str]] = {}
    for line in _data("iso639_3_to_lid176.tsv").splitlines():
        if line and not line.startswith("#"):
            code, label, name = line.split("\t")
            table[code] = (label, name)
    return table


def unknown_code_message(field: str, codes: tuple[str, ...]) -> str | None:
    """None when every code is a label of lid.176 (or `und`); else one line saying which are not
    and, for a 3-letter code of a language lid.176 knows, the code to use."""
    labels = set(lid176_labels()) | {UNKNOWN}
    unknown = [code for code in codes if code not in labels]
    if not unknown:
        return None
    hints = [
        f"{_three_letter()[code][0]!r} for {code!r} ({_three_letter()[code][1]})"
        for code in unknown
        if code in _three_letter()
    ]
    listed = ", ".join(repr(code) for code in unknown)
    hint = f"; use {', '.join(hints)}" if hints else ""
    return (
        f"{field}: {listed} {'is not a language code' if len(unknown) == 1 else 'are not language codes'} "
        f"of lid.176 (ISO 639-1 where the language has one: en, zh, de; all {len(labels) - 1} are in "
        f"dataclean/data/lang/lid176_labels.txt){hint}"
    )
