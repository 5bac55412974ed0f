"""Decode raw bytes as UTF-8 without losing the document: bad bytes are removed and counted."""

from __future__ import annotations


def decode_utf8(raw: bytes) -> tuple[str, int]:
    """Return (text, number of undecodable bytes removed).

    Valid UTF-8 takes the fast path. Otherwise every byte that is not part of a valid UTF-8
    sequence is dropped and the rest of the document is kept: one bad byte never costs a row.
    """
    try:
        return raw.decode("utf-8"), 0
    except UnicodeDecodeError:
        text = raw.decode("utf-8", "ignore")
        return text, len(raw) - len(text.encode("utf-8"))
