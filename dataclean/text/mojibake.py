"""Find the lines that hold mojibake or HTML entities and repair them with ftfy, quickly.

`repair_lines(text)` returns the text with each such line put through ftfy's own fixers
(`unescape_html`, then `fix_encoding` with its C1-control fix, to a fixed point as
`ftfy.fix_text` does: several layers of mojibake come off one after the other), and every other
line untouched. ftfy's other fixers (quotes, widths, ligatures, normalization, line breaks,
control characters) are not applied here; the clean stage does its own.

Which lines: the gate is built from ftfy's own tables, not from a hand-picked list, so it covers
every encoding ftfy's detector covers (Latin-1, Windows-1250/1251/1252/1253/1254/1257,
ISO-8859-2, MacRoman, cp437):
- mojibake of UTF-8 is a lead byte (0xC2-0xF4) followed by a continuation byte (0x80-0xBF), both
  read in one of `ftfy.chardata.CHARMAP_ENCODINGS`: one regex search finds a lead character of any
  of them followed by a continuation character of any of them, and a set lookup keeps the pairs
  that one encoding explains (`ні` in Ukrainian is such a pair in Windows-1251, `…”` in Chinese
  is in none);
- such a pair counts only when ftfy's detector (`ftfy.badness.BADNESS_RE`, the expression behind
  `is_bad`) matches within 4 characters of it (its patterns are at most six long), and ftfy then
  decides on the whole line as `fix_text` does (`fix_encoding` starts with `is_bad(line)`);
- a C1 control character (U+0080-U+009F) always sends its line to ftfy;
- an HTML entity (`&frac14;`, `&#233;`) sends its line to ftfy's `unescape_html` when no `<` came
  before it in the text (ftfy's "auto" rule: after a `<` the text is HTML, whose entities mean
  what they say), so mojibake under an entity (`10Î&frac14;s` -> `10μs`) is repaired too.
ASCII text without `&` costs one `str.isascii`; other text without these costs two regex scans
and two substring tests, or one scan when `mojibake_pair_flags` (a compiled pass over a batch's
UTF-8 bytes, most texts have no pair) already ruled the pairs out.
tests/text/test_mojibake.py measures the agreement with `ftfy.fix_text` on
real-world mojibake, on real lines broken through five code pages and on odd but correct text.
"""

from __future__ import annotations

import re
from functools import lru_cache

import ftfy
import ftfy.bad_codecs  # registers the sloppy-windows-* codecs that CHARMAP_ENCODINGS names
import numba
import numpy as np
import pyarrow as pa
from ftfy.badness import BADNESS_RE, MOJIBAKE_CATEGORIES
from ftfy.chardata import CHARMAP_ENCODINGS, HTML_ENTITY_RE

from dataclean.text.utf8 import decode_code_point, utf8_buffers

_C1 = re.compile("[\x80-\x9f]")
# ftfy also repairs these lead bytes when their continuation byte 0xA0 became a plain space
# (restore_byte_a0) or was lost to "?" or U+FFFD (replace_lossy_sequences): "voilÃ le travail".
_LOST_CONTINUATION = re.compile("[ÂÃ](?=[ ?\ufffd])")
# Characters either side of a pair that ftfy's detector looks at: its patterns (at most 6 long)
# that overlap or touch the pair.
_CONTEXT = 4


def _char_class(chars: set[str]) -> str:
    return "[" + "".join(re.escape(char) for char in sorted(chars)) + "]"


def _pattern_chars(pattern: str) -> set[str]:
    """The non-ASCII characters a regex source names, its character ranges expanded."""
    chars: set[str] = set()
    for start, end in re.findall(r"(.)-(.)", pattern):
        chars.update(map(chr, range(ord(start), ord(end) + 1)))
    chars.update(pattern)
    return {char for char in chars if ord(char) > 0x7F}


@lru_cache(maxsize=1)
def _needed() -> re.Pattern[str]:
    """Characters of which every pattern of ftfy's detector needs one: all it names but the
    lower-case letters (accented Latin, Greek, Cyrillic), except œ, which it flags before a
    non-letter. A pair with none of them nearby cannot be flagged, and the cheap search for them
    spares the detector's long alternation on accented prose (Czech `ší`, Ukrainian `ні`)."""
    lower = _pattern_chars(MOJIBAKE_CATEGORIES["lower_accented"] + MOJIBAKE_CATEGORIES["lower_common"])
    return re.compile(_char_class((_pattern_chars(BADNESS_RE.pattern) - lower) | {"œ"}))


@lru_cache(maxsize=1)
def _tables() -> tuple[re.Pattern[str], frozenset[str]]:
    """(lead character followed by a continuation character, in any encoding; the pairs that
    a single encoding explains), from ftfy's list of the encodings it repairs."""
    leads: set[str] = set()
    continuations: set[str] = set()
    pairs: set[str] = set()
    for encoding in CHARMAP_ENCODINGS:
        lead = set(bytes(range(0xC2, 0xF5)).decode(encoding)) - set(map(chr, range(0x80)))
        continuation = set(bytes(range(0x80, 0xC0)).decode(encoding))
        leads |= lead
        continuations |= continuation
        pairs.update(first + second for first in lead for second in continuation)
    pattern = re.compile(_char_class(leads) + "(?=" + _char_class(continuations) + ")")
    return pattern, frozenset(pairs)


@lru_cache(maxsize=1)
def pair_masks() -> tuple[np.ndarray, np.ndarray]:
    """Per BMP code point, a bit per encoding of `CHARMAP_ENCODINGS` in which it is a lead
    character (as `_tables` has them), and one in which it is a continuation character: a pair
    is in `_tables()[1]` exactly when its lead's bits and its continuation's bits meet."""
    lead = np.zeros(0x10000, np.uint16)
    continuation = np.zeros(0x10000, np.uint16)
    for bit, encoding in enumerate(CHARMAP_ENCODINGS):
        for char in set(bytes(range(0xC2, 0xF5)).decode(encoding)) - set(map(chr, range(0x80))):
            lead[ord(char)] |= 1 << bit
        for char in set(bytes(range(0x80, 0xC0)).decode(encoding)):
            continuation[ord(char)] |= 1 << bit
    return lead, continuation


@numba.njit(cache=True, nogil=True)
def _pair_kernel(data, offsets, lead, continuation, found):  # type: ignore[no-untyped-def]
    """Into `found` (zeros, allocated by the caller: `dataclean.jit`), which texts hold a pair."""
    for text in range(len(offsets) - 1):
        i, stop, previous = offsets[text], offsets[text + 1], 0
        while i < stop:
            byte = data[i]
            if byte < 0x80:
                previous = 0
                i += 1
                continue
            code, size = decode_code_point(data, i)
            i += size
            if code >= 0x10000:
                previous = 0
                continue
            if previous & continuation[code]:
                found[text] = True
                break
            previous = lead[code]


def mojibake_pair_flags(texts: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Per text of an Arrow string array (read in place), whether it holds a lead character
    followed by a continuation character that one encoding explains: `repair_lines` can skip its
    pair search (`may_have_pairs=False`) for the others, most texts."""
    data, offsets = utf8_buffers(texts)
    found = np.zeros(len(offsets) - 1, np.bool_)
    _pair_kernel(data, offsets, *pair_masks(), found)
    return found


def _bad_lines(text: str, may_have_c1: bool = True, may_have_pairs: bool = True) -> set[int]:
    """Start offsets of the lines with a mojibake pair that ftfy's detector flags (looked for
    only if `may_have_pairs`), or a C1 char (looked for only if `may_have_c1`)."""
    pattern, pairs = _tables()
    needed = _needed()
    starts: set[int] = set()
    searches = [pattern.finditer(text)] if may_have_pairs else []
    if "Â" in text or "Ã" in text:
        searches.append(_LOST_CONTINUATION.finditer(text))
    for matches in searches:
        line_end = -1  # end of the last line flagged: its other pairs need no look
        for match in matches:
            at = match.start()
            if at < line_end or (match.re is pattern and text[at : at + 2] not in pairs):
                continue
            low, high = max(0, at - _CONTEXT), at + 2 + _CONTEXT
            if needed.search(text, low, high) and BADNESS_RE.search(text, low, high):
                starts.add(text.rfind("\n", 0, at) + 1)
                line_end = text.find("\n", at) % (len(text) + 1)
    if may_have_c1 and _C1.search(text):
        starts.update(text.rfind("\n", 0, match.start()) + 1 for match in _C1.finditer(text))
    return starts


def _entity_lines(text: str) -> set[int]:
    """Start offsets of the lines with an HTML entity before the text's first `<` line."""
    html = text.find("<")
    stop = len(text) if html < 0 else text.rfind("\n", 0, html) + 1
    return {text.rfind("\n", 0, match.start()) + 1 for match in HTML_ENTITY_RE.finditer(text, 0, stop)}


@lru_cache(maxsize=2)
def _with_html(fix_encoding: bool) -> ftfy.TextFixerConfig:
    """ftfy's HTML unescaping, and its encoding fixer if asked; its other fixers off."""
    return ftfy.TextFixerConfig(
        unescape_html=True,
        fix_encoding=fix_encoding,
        fix_c1_controls=fix_encoding,
        remove_terminal_escapes=False,
        fix_latin_ligatures=False,
        fix_character_width=False,
        uncurl_quotes=False,
        fix_line_breaks=False,
        fix_surrogates=False,
        remove_control_chars=False,
        normalization=None,
        explain=False,
    )


def repair_lines(
    text: str,
    fix_encoding: bool = True,
    unescape_html: bool = True,
    may_have_c1: bool = True,
    may_have_pairs: bool = True,
) -> str:
    """`text` with its mojibake and HTML-entity lines repaired by ftfy (see the module docstring);
    `text` itself when nothing changes. `may_have_c1=False` (the caller knows there is no
    U+0080-U+009F) skips the search for C1 characters, `may_have_pairs=False` (the caller knows
    from `mojibake_pair_flags` that there is no mojibake pair) the search for pairs."""
    if text.isascii() and "&" not in text:
        return text
    starts = _bad_lines(text, may_have_c1, may_have_pairs) if fix_encoding else set()
    entities = _entity_lines(text) if unescape_html and "&" in text else set()
    if not starts and not entities:
        return text
    with_html = _with_html(fix_encoding)
    pieces: list[str] = []
    done = 0
    for start in sorted(starts | entities):
        end = text.find("\n", start) + 1 or len(text)
        pieces.append(text[done:start])
        line = text[start:end]
        # ftfy.fix_encoding is fix_text with only that fixer (C1 controls included), without the
        # second pass fix_text makes to see that nothing changes any more.
        pieces.append(ftfy.fix_text(line, with_html) if start in entities else ftfy.fix_encoding(line))
        done = end
    pieces.append(text[done:])
    return "".join(pieces)
