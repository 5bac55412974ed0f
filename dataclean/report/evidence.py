"""Where in a dropped row's text the reason for the drop is, so that the report's excerpt shows it.

A row dropped for a control character, a repetition run or a base64 blob at character 3,000 is not
explained by its first 300 characters. `evidence_span(kind, text)` finds, for the reasons that
point at a place, the first such place (start, end); the excerpt is a window around it:
- `clean:garbage`: the first garbage character (control, replacement, private-use, box drawing:
  the clean stage's own class);
- `clean:encoded_data`: the first base64 or hex run (`dataclean.text.noise`'s run rule);
- `quality:long_ngram_run` and other repetition reasons (`clean:repetition` of earlier runs):
  the first unit of 1 to 13 characters repeated 8 times or more in a row;
- others (`empty`, `random_bytes`, near-duplicates...): None, the text from its start.
"""

from __future__ import annotations

import re

from dataclean.text.cleaning import GARBAGE_CHARACTERS

_ENCODED = re.compile(r"(?=[A-Za-z+/=]*[0-9])[A-Za-z0-9+/]{24,}={0,2}")
_REPEATED = re.compile(r"(.{1,13}?)\1{7,}", re.DOTALL)


def evidence_span(kind: str, text: str) -> tuple[int, int] | None:
    """(start, end) in `text` of what the reason kind (`clean:garbage`) points at, or None."""
    if kind == "clean:garbage":
        pattern: re.Pattern[str] = GARBAGE_CHARACTERS
    elif kind == "clean:encoded_data":
        pattern = _ENCODED
    elif "repetition" in kind or kind.endswith(("long_ngram_run", "_run")):
        pattern = _REPEATED
    else:
        return None
    found = pattern.search(text)
    return (found.start(), found.end()) if found else None


def window(length: int, span: tuple[int, int] | None, size: int) -> tuple[int, int]:
    """The `size` characters of a text of `length` to show: from the start, or with the evidence a
    third of the way in."""
    if span is None or span[0] < size // 3:
        return 0, min(length, size)
    start = min(span[0] - size // 3, max(length - size, 0))
    return start, min(length, start + size)
