"""Where a text may be cut: paragraph, sentence and line boundaries, then weaker fallbacks.

Every boundary is an offset into the text (a cut *after* that many characters) with a level; lower
levels are stronger cuts:

    PARAGRAPH  a blank line (two or more newlines), whatever precedes it
    SENTENCE   a sentence end, with its closing quotes/brackets and the whitespace after it
    LINE       a single newline that does not end a sentence (headings, list items, wrapped lines)
    CLAUSE     weak punctuation: ，、：,;: (only inside a sentence that alone is over a budget)
    SPACE      a whitespace run (same)
    CHAR       a character boundary not inside a surrogate pair or (unless longer than the budget)
               a grapheme cluster

Whitespace always stays with the text before it, so the pieces between boundaries join back to
the text exactly.

Rules are written by hand here because no library on PyPI served (measured with
benchmarks/bench_split.py on 2 shared cores; the target is 20 MB/s per core on long documents):
- pysbd 0.3.4 (last release 2021): 0.1-0.3 MB/s on English, 0.5-1.3 MB/s on Chinese; splits
  “你好。”然后 before the closing quote; its segments and char spans do not give back the text.
- sentencex 1.0.32 (Wikimedia): fast on clean prose (50-100 MB/s on detokenized English, 20-60
  on Chinese) but superlinear on some inputs: on WikiText's tokenized text 34 MB/s for 10 KB,
  2.9 MB/s for 50 KB, 0.2 MB/s for 800 KB, a risk on arbitrary web data. It also drops characters
  at paragraph breaks (no exact offsets), cuts after 《你好吗？》 and inside ３．５, and never cuts
  at ； or …… .
- blingfire 0.1.8: 4-9 MB/s through its Python offsets API; cuts 。” and 《书名？》 wrongly.

What we take from a library is its knowledge: the English abbreviation list comes from pysbd's
(data/split/abbreviations_en.tsv), its golden rules are test cases, and the benchmark reports
agreement with it (0.99 of pysbd's English sentence ends found). The rules are script-based per
boundary, so mixed Chinese/English text needs no language tag:

- Chinese: 。！？；．｡ and …/…… end a sentence wherever they stand, with the closing quotes and
  brackets after them (“你好。”  ？」  ！）); a terminator inside 《书名》 does not; ． between
  digits is a decimal point; half-width . ! ? end a sentence when a Chinese character precedes
  them and a Chinese character, whitespace or the end of the text follows.
- English: . ! ? and ellipses end a sentence only before whitespace (so 3.14, e-mail addresses,
  URLs and file names never split), and never before a lower-case word; after a period also not
  after a title abbreviation (Mr. Dr. e.g.), a single-letter initial (J. R. R. Tolkien), a
  general abbreviation or dotted acronym unless an upper-case word follows (Jan. 5, U.S. economy),
  or a list number at the start of a sentence (1. 2. iv. a.).
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from importlib import resources

PARAGRAPH, SENTENCE, LINE, CLAUSE, SPACE, CHAR = range(6)

_CLOSERS = "\"'”’)]}»›」』》〉）］｝】〕〗〙〛＂＇〞"
_CJK_TERMINATORS = frozenset("。！？；．｡")
_ELLIPSES = frozenset("…‥")
_TERMINATORS = frozenset(".!?…‥。！？；．｡")
_BULLETS = " \t•‣⁃◦∙·*-–—"

# One pass finds every candidate: a terminator run or a newline, with the closers and whitespace
# after it. A single character class first lets the regex engine skip ahead at C speed.
_CANDIDATE = re.compile(r"[.!?…‥。！？；．｡\n][.!?…‥。！？；．｡]*[" + re.escape(_CLOSERS) + r"]*\s*")
_TERMINATOR_CHARS = ".!?…‥。！？；．｡"
_CLAUSE = re.compile(r"[，、：﹐﹑﹕](?:[" + re.escape(_CLOSERS) + r"]*)\s*|[,;:](?=\s)\s*")
_SPACE = re.compile(r"\s+")
_ROMAN = re.compile(r"[ivxlcIVXLC]{1,6}")


def _is_cjk(char: str) -> bool:
    """CJK ideographs, kana, CJK punctuation and full-width forms."""
    code = ord(char)
    return (
        0x2E80 <= code <= 0x9FFF
        or 0xF900 <= code <= 0xFAFF
        or 0xFF00 <= code <= 0xFFEF
        or 0x20000 <= code <= 0x3FFFF
    )


@lru_cache(maxsize=1)
def abbreviations() -> tuple[frozenset[str], frozenset[str]]:
    """(title, general) English abbreviations from data/split/abbreviations_en.tsv."""
    table = resources.files("dataclean") / "data" / "split" / "abbreviations_en.tsv"
    title: set[str] = set()
    general: set[str] = set()
    for line in table.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#") or line.startswith("abbreviation\t"):
            continue
        word, _, kind = line.partition("\t")
        (title if kind == "title" else general).add(word)
    return frozenset(title), frozenset(general)


def _period_ends_sentence(text: str, at: int, after: str, unit_start: int) -> bool:
    """Whether the single period at `text[at]`, followed by whitespace, ends a sentence.

    `after` is the first character after the whitespace ("" at the end of the text) and
    `unit_start` where the current sentence began (for list numbers).
    """
    if at == 0 or text[at - 1].isspace():
        return True  # a free-standing period (tokenized text: "end .")
    window = text[max(0, at - 24) : at].split()
    raw = window[-1] if window else ""
    token = raw.lstrip("(\"'“‘[{<«")
    lower = token.lower()
    title, general = abbreviations()
    if lower in title:
        return False
    if len(token) == 1 and token.isalpha() and token != "I":
        return False  # an initial or a list letter
    upper_next = after == "" or after.isupper() or _is_cjk(after)
    if lower in general:
        return upper_next
    if "." in token and all(0 < len(part) <= 2 and part.isalpha() for part in token.split(".")):
        return upper_next  # dotted acronym: U.S, a.m, Ph.D
    if len(token) <= 6 and at - len(raw) - unit_start <= 4:
        # "1." or "iv." at the start of a sentence is a list marker, not a sentence.
        lead = text[unit_start : at - len(raw)]
        if not lead.strip(_BULLETS) and ((token.isdigit() and len(token) <= 3) or _ROMAN.fullmatch(token)):
            return False
    return True


def sentence_boundaries(text: str) -> tuple[list[int], list[int]]:
    """Offsets where a sentence, line or paragraph ends (before len(text)), and their levels.

    Offsets are strictly increasing, each after the whitespace that follows the boundary.
    """
    ends: list[int] = []
    levels: list[int] = []
    n = len(text)
    has_titles = "《" in text
    unit_start = 0
    # Parity of ASCII '"' since the line start, to tell an opening '"' from a closing one.
    open_quotes = 0
    quotes_counted_to = 0
    for match in _CANDIDATE.finditer(text):
        start, end = match.span()
        if end >= n:
            break
        found = match.group()
        first = found[0]
        if first == "\n":
            end = start + len(found) - len(found.lstrip())
            levels.append(PARAGRAPH if found.count("\n", 0, end - start) > 1 else LINE)
            ends.append(end)
            unit_start = quotes_counted_to = end
            open_quotes = 0
            continue
        before = text[start - 1] if start else ""
        after = text[end]
        if found == ". " and before < "\u2e80":
            # Fast path for the most common English candidate: a period and one space.
            if (
                not after.islower()
                and after not in _TERMINATORS
                and _period_ends_sentence(text, start, after, unit_start)
            ):
                ends.append(end)
                levels.append(SENTENCE)
                unit_start = end
            continue
        if end - start == 1 and (first in _CJK_TERMINATORS or after < "\u2e80"):
            # Fast paths for the most common candidates: a lone 。 and a period inside a token.
            if first not in _CJK_TERMINATORS:
                continue  # 3.14, example.com, Yahoo!Inc: never a boundary
            if (first == "．" and before.isdigit() and after.isdigit()) or (
                has_titles and _in_title(text, unit_start, start)
            ):
                continue
            ends.append(end)
            levels.append(SENTENCE)
            unit_start = end
            continue
        rest = found.lstrip(_TERMINATOR_CHARS)
        term = found[: len(found) - len(rest)]
        space_start = len(rest.rstrip())
        close = rest[:space_start]
        space = rest[space_start:]
        if '"' in close:
            open_quotes ^= text.count('"', quotes_counted_to, start) & 1
            quotes_counted_to = start
        cjk = (
            not _CJK_TERMINATORS.isdisjoint(term)
            or (before >= "\u2e80" and _is_cjk(before) and (space != "" or _is_cjk(after)))
            or (term[0] in _ELLIPSES and _is_cjk(after))
        )
        if cjk:
            boundary = not (
                (term == "．" and before.isdigit() and after.isdigit())
                or (has_titles and _in_title(text, unit_start, start))
            )
            if boundary and close[:1] == '"' and not open_quotes:
                # An ASCII quote right after the terminator opens the next sentence.
                end = start + len(term)
                space = ""
        elif not space:
            boundary = _is_cjk(after)
        elif after.islower() or after in _TERMINATORS:
            boundary = False
        elif term == ".":
            boundary = _period_ends_sentence(text, start, after, unit_start)
        else:
            boundary = True
        newlines = space.count("\n")
        if newlines > 1:
            level = PARAGRAPH
        elif boundary:
            level = SENTENCE
        elif newlines:
            level = LINE
        else:
            continue
        ends.append(end)
        levels.append(level)
        unit_start = end
        if newlines:
            quotes_counted_to = end
            open_quotes = 0
    return ends, levels


def _in_title(text: str, unit_start: int, at: int) -> bool:
    """Whether text[at] is inside 《书名》 opened in the current sentence (within 256 chars)."""
    low = max(unit_start, at - 256)  # a bound keeps long unsplit runs linear
    return text.rfind("《", low, at) > text.rfind("》", low, at)


def weak_boundaries(text: str, start: int, stop: int, level: int) -> list[int]:
    """Offsets inside text[start:stop] after weak punctuation (CLAUSE) or whitespace (SPACE)."""
    pattern = _CLAUSE if level == CLAUSE else _SPACE
    return [m.end() for m in pattern.finditer(text, start, stop) if start < m.end() < stop]


def _joins_previous(text: str, at: int) -> bool:
    """Whether a cut before text[at] would split a surrogate pair or a grapheme cluster."""
    char = text[at]
    code = ord(char)
    if 0xDC00 <= code <= 0xDFFF and at > 0 and 0xD800 <= ord(text[at - 1]) <= 0xDBFF:
        return True
    if code in (0x200D, 0xFE0E, 0xFE0F) or 0xFE00 <= code <= 0xFE0F or 0x1F3FB <= code <= 0x1F3FF:
        return True  # zero-width joiner, variation selectors, skin-tone modifiers
    if at > 0 and ord(text[at - 1]) == 0x200D:
        return True
    return unicodedata.category(char) in ("Mn", "Mc", "Me")


def char_boundary(text: str, at: int, low: int, high: int) -> int:
    """The safe character cut nearest `at` strictly inside (low, high), preferring before `at`.

    Safe: not inside a grapheme cluster (combining marks, ZWJ sequences, variation selectors) nor
    a surrogate pair. When a cluster fills the whole range (Zalgo text), the budget wins over the
    cluster, never over a surrogate pair.
    """
    position = at
    while position > low and _joins_previous(text, position):
        position -= 1
    if position > low:
        return position
    position = at
    while position < high and _joins_previous(text, position):
        position += 1
    if position < high:
        return position
    if 0 < at < len(text) and "\udc00" <= text[at] <= "\udfff" and "\ud800" <= text[at - 1] <= "\udbff":
        return at - 1 if at - 1 > low else at + 1
    return at


def split_sentences(text: str) -> list[str]:
    """The text's sentences (and lines, and paragraphs), whitespace kept with the text before it.

    `"".join(split_sentences(text)) == text` always holds.
    """
    ends, _ = sentence_boundaries(text)
    starts = [0, *ends]
    pieces = [text[a:b] for a, b in zip(starts, [*ends, len(text)], strict=True)]
    return [piece for piece in pieces if piece]
