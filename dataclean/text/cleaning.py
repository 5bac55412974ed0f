"""The clean stage's text function, one string at a time: what `dataclean.stages.clean` does to a row.

`clean_text` repairs mojibake and HTML entities line by line (`dataclean.text.mojibake`), removes
ANSI/VT escape sequences whole (`dataclean.text.escapes`), C0/C1 control characters (keeping tab
and newline; CR and CRLF become LF), U+FFFD, zero-width and bidi controls, soft hyphens and byte
order marks, maps exotic spaces to a plain space, and keeps ZWJ/ZWNJ only between non-ASCII
characters; the stage's docstring says why each. `clean_parts` gives what the stage counts too.
Here, apart from the stage, so that the report (`dataclean.report`) shows what cleaning keeps of
a row with the same function, without importing a stage. `clean_text` also resolves MediaWiki
language-conversion markup (`-{zh-cn:...; zh-tw:...}-`), as the stage does after the rest. The
regexes are also the character classes of the stage's compiled removal pass
(`dataclean.text.removal.char_classes`).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Literal

from dataclean.text.escapes import strip_escape_sequences
from dataclean.text.mojibake import repair_lines
from dataclean.text.wiki_markup import resolve_conversion_markup

# Any character that the removal steps may change, or that counts as garbage: the fast-path test.
_SUSPECT = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00a0\u00ad\u1680\u2000-\u200f\u2028-\u202f"
    "\u205f-\u206f\u2500-\u25ff\u3000\ue000-\uf8ff\ufeff\ufffd\U000f0000-\U0010ffff]"
)
GARBAGE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2500-\u25ff\ue000-\uf8ff\ufffd\U000f0000-\U0010ffff]"
)
# What counts as garbage, for the report's excerpts too (`dataclean.report.evidence`).
GARBAGE_CHARACTERS = GARBAGE
REMOVE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064"
    "\u2066-\u206f\ufeff\ufffd]"
)
SPACES = re.compile("[\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]")
LINE_SEPARATORS = re.compile("\r\n?|[\u2028\u2029]")
# ZWNJ/ZWJ next to ASCII or at an edge carry no meaning; between other characters they may.
_EDGE_JOINERS = re.compile("(?:(?<=[\x00-\x7f])|^)[\u200c\u200d]+|[\u200c\u200d]+(?=[\x00-\x7f]|$)")
# Characters that send a row down the Python path: what `repair_lines` looks for besides mojibake
# pairs and HTML entities (C1 characters, Â/Ã before a lost continuation byte), ZWNJ/ZWJ and the
# ESC that starts an escape sequence (`dataclean.text.escapes`).
PYTHON_ONLY = re.compile("[\x1b\u00c2\u00c3\u200c\u200d\x80-\x9f]")

Normalization = Literal["none", "NFC", "NFKC"]


def clean_parts(
    text: str,
    normalization: Normalization,
    fix_mojibake: bool,
    unescape_html: bool,
    may_have_pairs: bool = True,
) -> tuple[str, int, int, int]:
    """(cleaned text, characters removed or replaced, garbage characters before removal, escape
    sequences removed); `may_have_pairs=False` when `mojibake_pair_flags` found no mojibake pair
    in `text`. Escape sequences go first, whole, before their ESC would be removed alone."""
    suspect = _SUSPECT.search(text)
    sequences = escaped = 0
    if suspect is not None and "\x1b" in text:
        text, sequences, escaped = strip_escape_sequences(text)
        suspect = _SUSPECT.search(text)
    if fix_mojibake or unescape_html:
        # Without suspect characters there is no C1 character for the repair to look for.
        repaired = repair_lines(
            text, fix_mojibake, unescape_html, may_have_c1=suspect is not None, may_have_pairs=may_have_pairs
        )
        if repaired is not text:
            text, suspect = repaired, _SUSPECT.search(repaired)
    if suspect is None:
        if normalization != "none":
            text = unicodedata.normalize(normalization, text)
        return text, escaped, 0, sequences
    # Every character the steps below count, remove or replace is a suspect one, and no step
    # adds or removes another step's characters: collect the suspects in one scan, count the
    # garbage among them, and run only the steps whose characters are there.
    found = "".join(_SUSPECT.findall(text, suspect.start()))
    garbage = len(GARBAGE.findall(found))
    lines = removed = spaces = joiners = 0
    if "\r" in found or "\u2028" in found or "\u2029" in found:
        text, lines = LINE_SEPARATORS.subn("\n", text)
    if REMOVE.search(found):
        text, removed = REMOVE.subn("", text)
    if SPACES.search(found):
        text, spaces = SPACES.subn(" ", text)
    if "\u200c" in found or "\u200d" in found:
        text, joiners = _EDGE_JOINERS.subn("", text)
    if normalization != "none":
        text = unicodedata.normalize(normalization, text)
    return text, escaped + lines + removed + spaces + joiners, garbage, sequences


def clean_text(
    text: str,
    normalization: Normalization = "none",
    fix_mojibake: bool = True,
    unescape_html: bool = True,
    resolve_wiki_markup: bool = True,
) -> str:
    """Return `text` cleaned as the module docstring (and `dataclean.stages.clean`'s) describes,
    MediaWiki language-conversion markup resolved last (`dataclean.text.wiki_markup`)."""
    cleaned = clean_parts(text, normalization, fix_mojibake, unescape_html)[0]
    return resolve_conversion_markup(cleaned)[0] if resolve_wiki_markup else cleaned
