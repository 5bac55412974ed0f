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
(data/split/abbreviations_en.tsv), the sentence starters and exclamation names are pragmatic
segmenter's as pysbd ships them (data/split/words_en.tsv), the English golden rules and pysbd's
regression cases are test cases (0.97 exact agreement, as pysbd's own), and the benchmark reports
agreement with pysbd on real documents. The rules are script-based per boundary, so mixed
Chinese/English text needs no language tag:

- Chinese: 。！？；．｡ and …/…… end a sentence wherever they stand, with the closing quotes and
  brackets after them (“你好。”  ？」  ！）); a terminator inside 《书名》 does not; ． between
  digits is a decimal point; half-width . ! ? end a sentence when a Chinese character precedes
  them and a Chinese character, whitespace or the end of the text follows.
- English: . ! ? and ellipses end a sentence only before whitespace (so 3.14, e-mail addresses,
  URLs and file names never split), with the closing quotes and brackets after them, and never
  before a lower-case word. After a period, not:
  - after a title abbreviation (Mr. Dr. e.g. Mt.), a lower-case single letter (p. 55, v.);
  - after a general abbreviation (Jan. Co. no.) unless an upper-case word other than I follows
    (pysbd's rule: "Co. It closed" splits, "Jan. 5" does not);
  - after a dotted acronym (U.S. E.U. J.C.) unless a word that usually starts a sentence follows
    ("the U.S. How about", not "the U.S. Government"), nor after an upper-case initial unless
    such a word follows and the word before is not a name ("you and I. Did", not "Albert I.
    Jones", "Q. What");
  - after a.m./p.m. only before an upper-case word, and not when the sentence so far is a fronted
    phrase (a preposition and up to two words: "At 5 a.m. Mr. Smith went");
  - after a list number at the start of a sentence (1. 2. iv. a.);
  - inside a spaced ellipsis (". . ." marks words left out); four spaced periods end the
    sentence, and "word. . . ." ends it after the word's own period;
  - before a parenthesized citation closed by a terminator ('... stairways [...]" (Smith 55).').
  "!" after an exclamation name (Yahoo!) does not end a sentence. List items inside a line start
  a sentence when their markers count in sequence ("1.) The first item 2.) The second item",
  "a. The first item b. The second", "• 9. ... • 10. ..."), the sequence having begun a line or
  sentence.
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
_ROMAN = re.compile(r"[ivxlc]{1,6}|[IVXLC]{1,6}")
_ROMAN_VALUES = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100}
_WORD = re.compile(r"[^\s,;:.!?)\]}”’\"]+")
# A list marker closed by a parenthesis alone ("2) The second item"), found apart from the
# sentence candidates (".)" markers are period candidates).
_PAREN_MARKER = re.compile(r"\)(?= +[A-Z])")
_LIST_BULLETS = "•⁃‣◦"
# A parenthesized citation closed by a terminator: "... stairways [...]" (Smith 55).
_CITATION = re.compile(r"\([^()\n]{1,80}\)[.!?]")
# An attached period followed by a spaced three-dot ellipsis and a new sentence ("compounds. . . . The").
_ELLIPSIS_AFTER = re.compile(r" ?\. \. \.\s+[A-Z\"“‘'(\[]")


def _is_cjk(char: str) -> bool:
    """CJK ideographs, kana, CJK punctuation and full-width forms."""
    code = ord(char)
    return (
        0x2E80 <= code <= 0x9FFF
        or 0xF900 <= code <= 0xFAFF
        or 0xFF00 <= code <= 0xFFEF
        or 0x20000 <= code <= 0x3FFFF
    )


def _read_table(name: str) -> dict[str, set[str]]:
    """A two-column TSV of data/split (`#` comments, a header row): the words of each kind."""
    table = resources.files("dataclean") / "data" / "split" / name
    kinds: dict[str, set[str]] = {}
    for line in table.read_text(encoding="utf-8").splitlines()[1:]:
        if not line or line.startswith("#") or "\t" not in line:
            continue
        word, _, kind = line.partition("\t")
        if word not in ("abbreviation", "word"):
            kinds.setdefault(kind, set()).add(word)
    return kinds


@lru_cache(maxsize=1)
def _words() -> dict[str, frozenset[str]]:
    """English word lists by kind: title, general, time (data/split/abbreviations_en.tsv);
    starter, preposition, exclamation (data/split/words_en.tsv)."""
    found = _read_table("abbreviations_en.tsv") | _read_table("words_en.tsv")
    kinds = ("title", "general", "time", "starter", "preposition", "exclamation")
    return {kind: frozenset(found.get(kind, ())) for kind in kinds}


def abbreviations() -> tuple[frozenset[str], frozenset[str]]:
    """(title, general) English abbreviations from data/split/abbreviations_en.tsv."""
    words = _words()
    return words["title"], words["general"]


def _next_word(text: str, at: int) -> str:
    """The word starting at `at`, without the punctuation that follows it."""
    match = _WORD.match(text, at)
    return match.group() if match else ""


def _spaced_period_ends_sentence(text: str, at: int) -> bool:
    """Whether a period after a space ("end ." or the last of ". . .") ends a sentence.

    A spaced ellipsis of three (". . .") marks words left out inside a sentence; of four, or a
    period attached to a word followed by three (pragmatic segmenter's ellipsis rules), the
    sentence ends: after the fourth period, or after the attached one (handled there).
    """
    count, start = 1, at
    while start >= 2 and text[start - 1] == " " and text[start - 2] == ".":
        count, start = count + 1, start - 2
    attached = start > 0 and not text[start - 1].isspace()
    if attached:
        return count < 4
    return count != 3


def _is_fronted_phrase(text: str, unit_start: int, at: int) -> bool:
    """Whether the sentence so far is a preposition and at most two more words ("At 5 a.m.")."""
    words = text[unit_start:at].split()
    return 0 < len(words) <= 3 and words[0].lstrip("(\"'“‘") in _words()["preposition"]


def _period_ends_sentence(text: str, at: int, after: str, unit_start: int, end: int) -> bool:
    """Whether the single period at `text[at]`, followed by whitespace, ends a sentence.

    `after` is the first character after the whitespace ("" at the end of the text), `end` its
    offset, and `unit_start` where the current sentence began (for list numbers).
    """
    if at == 0 or text[at - 1].isspace():
        return _spaced_period_ends_sentence(text, at)
    window = text[max(0, at - 24) : at].split()
    raw = window[-1] if window else ""
    token = raw.lstrip("(\"'“‘[{<«" + _LIST_BULLETS)
    lower = token.lower()
    words = _words()
    if lower in words["title"]:
        return False
    upper_next = after == "" or after.isupper() or _is_cjk(after)
    if len(token) == 1 and token.isalpha():
        # A lower-case letter is an initial, a list letter or a variable; an upper-case one ends
        # a sentence only before a sentence starter and after a word that is not a name ("you
        # and I. Did", not "Albert I. Jones" nor "Q. What").
        if token.islower() or _next_word(text, end) not in words["starter"]:
            return False
        previous = text[max(unit_start, at - 40) : at - len(raw)].split()
        return bool(previous) and not previous[-1][:1].isupper()
    if lower in words["time"]:
        return upper_next and not _is_fronted_phrase(text, unit_start, at)
    if lower in words["general"]:
        return upper_next and _next_word(text, end) not in ("I", "I'm", "I'll")
    if "." in token and all(0 < len(part) <= 2 and part.isalpha() for part in token.split(".")):
        # A dotted acronym (U.S, E.U, J.C, Ph.D) ends a sentence before a sentence starter only.
        return _next_word(text, end) in words["starter"]
    if len(token) <= 6 and at - len(raw) - unit_start <= 4:
        # "1." or "iv." at the start of a sentence is a list marker, not a sentence.
        lead = text[unit_start : at - len(raw)]
        if not lead.strip(_BULLETS) and ((token.isdecimal() and len(token) <= 3) or _ROMAN.fullmatch(token)):
            return False
    return True


def _list_value(token: str) -> list[tuple[str, int]]:
    """(kind, value) readings of a list marker's label: 3 -> number 3, c -> letter 3, iv -> roman 4."""
    if token.isdecimal():  # decimal digits of any script; not "²" or "①", which int() refuses
        return [("number", int(token))]
    readings = []
    if len(token) == 1:
        readings.append(("lower" if token.islower() else "upper", ord(token.lower()) - ord("a") + 1))
    if _ROMAN.fullmatch(token):
        value, previous = 0, 0
        for char in reversed(token.lower()):
            digit = _ROMAN_VALUES[char]
            value, previous = (value - digit, previous) if digit < previous else (value + digit, digit)
        readings.append(("roman" if token.islower() else "ROMAN", value))
    return readings


def _may_be_label(text: str, at: int) -> bool:
    """Cheap test before `_label_before`: a word ending in two letters that are not both roman
    numerals ("word.") is no list label."""
    tail = text[at - 2 : at]
    return not (tail.isalpha() and tail.lower().strip("ivxlc"))


def _label_before(text: str, at: int) -> tuple[int, str] | None:
    """(where the marker starts, its label) if text[:at] ends with a list label: a number of up
    to 3 digits, a letter or a roman numeral, after whitespace or a bullet ("• 9", "⁃10", " b")."""
    low = max(0, at - 8)
    space = max(text.rfind(" ", low, at), text.rfind("\n", low, at), text.rfind("\t", low, at))
    if space < 0 and low > 0:
        return None
    start = space + 1
    token = text[start:at]
    label = token.lstrip(_LIST_BULLETS)
    if not label or not (
        (label.isdecimal() and len(label) <= 3)
        or (len(label) == 1 and label.isalpha())
        or _ROMAN.fullmatch(label)
    ):
        return None
    if label == token and start >= 2 and text[start - 1] == " " and text[start - 2] in _LIST_BULLETS:
        start -= 2  # "• 9.": the item starts at its bullet
    return start, label


class _ListChains:
    """Numbered and lettered list items inside a line ("1.) The first item 2.) The second").

    A marker (a label with ".", ")" or ".)", then an upper-case word) starts an item when it
    follows the previous marker of the same kind and style in sequence (1 -> 2, a -> b, iv -> v),
    and that sequence began at the start of a line or sentence or after a colon. Prose rarely
    counts in sequence with an upper-case word after each number.
    """

    def __init__(self) -> None:
        self.last: dict[tuple[str, str], int] = {}

    def starts_item(
        self, text: str, marker: int, label: str, style: str, ends: list[int], levels: list[int]
    ) -> bool:
        """Note the marker at text[marker]; if it continues a list, cut before it (appending to
        `ends`, `levels`) and return True."""
        readings = _list_value(label)
        continued = any(self.last.get((kind, style)) == value - 1 for kind, value in readings)
        before = text[max(0, marker - 8) : marker].rstrip(" \t")
        if continued or not before or before[-1] in "\n.!?:;)":
            for kind, value in readings:
                self.last[(kind, style)] = value
        if not continued or marker <= (ends[-1] if ends else 0):
            return False
        ends.append(marker)
        levels.append(SENTENCE)
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
    lists = _ListChains()
    # Markers closed by ")" alone: (offset of the ")", label), merged in order with the candidates.
    parens = [
        (match.start(), labelled[1])
        for match in _PAREN_MARKER.finditer(text)
        if text[match.start() - 1 : match.start()] != "." and (labelled := _label_before(text, match.start()))
    ]
    next_paren = 0
    # Parity of ASCII '"' since the line start, to tell an opening '"' from a closing one.
    open_quotes = 0
    quotes_counted_to = 0
    for match in _CANDIDATE.finditer(text):
        start, end = match.span()
        if end >= n:
            break
        while next_paren < len(parens) and parens[next_paren][0] < start:
            paren, label = parens[next_paren]
            if lists.starts_item(text, paren - len(label), label, ")", ends, levels):
                unit_start = ends[-1]
            next_paren += 1
        found = match.group()
        first = found[0]
        if first == "\n":
            end = start + len(found) - len(found.lstrip())
            levels.append(PARAGRAPH if found.count("\n", 0, end - start) > 1 else LINE)
            lists.last.clear()
            ends.append(end)
            unit_start = quotes_counted_to = end
            open_quotes = 0
            continue
        before = text[start - 1] if start else ""
        after = text[end]
        if found == ". " and before < "\u2e80":
            # Fast path for the most common English candidate: a period and one space.
            marked = _label_before(text, start) if after.isupper() and _may_be_label(text, start) else None
            if marked and lists.starts_item(text, *marked, ".", ends, levels):
                unit_start = ends[-1]
            if not after.islower() and _english_boundary(text, start, end, ".", after, unit_start):
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
        else:
            marked = _label_before(text, start) if term == "." and after.isupper() else None
            if marked and close in ("", ")") and lists.starts_item(text, *marked, "." + close, ends, levels):
                unit_start = ends[-1]
            boundary = _english_boundary(text, start, end, term, after, unit_start)
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
    for paren, label in parens[next_paren:]:
        lists.starts_item(text, paren - len(label), label, ")", ends, levels)
    return ends, levels


def _english_boundary(text: str, start: int, end: int, term: str, after: str, unit_start: int) -> bool:
    """Whether the terminators `term` at text[start], then closers and whitespace up to `end`
    (before `after`, not CJK), end a sentence."""
    if after.islower():
        return False
    if after in _TERMINATORS:
        # "compounds. . . . The": the attached period ends the sentence, the ellipsis opens the next.
        return (
            term == "."
            and start > 0
            and not text[start - 1].isspace()
            and bool(_ELLIPSIS_AFTER.match(text, end))
        )
    if after == "(" and _CITATION.match(text, end):
        return False  # a citation after a quotation belongs to it: "... stairways" (Smith 55).
    if term == ".":
        return _period_ends_sentence(text, start, after, unit_start, end)
    if term == "!":
        words = text[max(unit_start, start - 24) : start].split()
        return not words or words[-1].lstrip("(\"'“‘") not in _words()["exclamation"]
    return True


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
