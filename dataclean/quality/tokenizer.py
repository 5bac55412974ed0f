"""Words as spaCy's blank English tokenizer cuts them (datatrove's default), compiled with numba.

datatrove's Gopher, C4 and FineWeb filters count the tokens of `spacy.blank("en")`. This is that
tokenizer's algorithm (spaCy's `Tokenizer._split_affixes` / `_attach_tokens`) over a code-point
buffer, with its regexes replaced by per-character classes (`dataclean.quality.chars`) and its
tables (`dataclean/data/quality/`): text is cut at whitespace (`str.isspace`); each chunk that is
not a special case (`don't` -> `do` `n't`, `a.m.`, `:)`) loses prefixes (the first matching
alternative: one punctuation/quote/currency/icon character, a run of dots, `US$`) and suffixes
(the longest matching one: a punctuation character, a run of dots, `'s`, a unit or currency after
a digit, a period after a lower-case letter, a digit, punctuation or two capitals) until none is
left or a special case remains; what is left is one token if it is a special case or a URL
(spaCy's `URL_MATCH` without its IP-address branch), else it is cut at infixes (dot runs, `…`,
icons, `-`/`–`/`—`/`~` or `:<>=/` between letters, `,` between letters, `.` between a lower- and
an upper-case letter, `+-*^` between digits).

Not reproduced: spaCy's second pass that matches special cases across tokens after splitting
(cases such as `:)` glued to a following word), the IP-address branch of `URL_MATCH`, and
spaCy's ASCII-only treatment of case in `lorem`-style substring tests is not this module's job.
The agreement with spaCy on real pages is measured by `benchmarks/bench_quality.py`.

In the Chinese rules (`han=True`) every Han or kana character is a chunk of its own, so it is
one word; runs of other characters (Latin words, digits, punctuation) are tokenized as above.
With `SEGMENT` runs of Han characters are jieba's words instead (`dataclean.quality.segmenter`),
in the Chinese rules and in English's (English quoting Chinese; kana stays in its chunk there).

Other languages' spaCy tokenizers (datatrove's for FineWeb-2's languages) differ from English's
in a few rules that change word counts; a table's word style bits switch them: elision (`l'uomo`
-> `l'` `uomo`), hyphens between letters (split before a lower-case letter only, or never),
brackets and quotes between letters, a period after a digit, and French's own rules (words it
never cuts such as `grand-père`, its elision prefix, hyphen suffixes and special cases:
`dataclean.quality.french`) (`STYLES`); Korean's tokens are cut closer to Kiwi's morphemes
(`dataclean.quality.korean`). Japanese words are SudachiPy's, cut outside this module
(`dataclean.quality.japanese`, `SUDACHI`).
"""

# numba kernels compute on numpy scalars, which mypy sees as Any here.
# mypy: disable-error-code="no-any-return"

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numba
import numpy as np

from dataclean.jit import helper
from dataclean.quality import chars as F
from dataclean.quality import french as FR
from dataclean.quality.chars import TABLES
from dataclean.quality.french import (
    french_before_period,
    french_prefix,
    french_suffix,
    french_suffix_char,
    french_token_match,
    pack_french,
)
from dataclean.quality.hashing import Packer, _find, hash_set, packed_ints, packed_set, packed_value
from dataclean.quality.hashing import _fnv as _fnv  # re-exported: the rules hash as the tokenizer does
from dataclean.quality.hashing import fnv_hash as fnv_hash
from dataclean.quality.korean import LONGEST_ENDING, korean_words, pack_korean
from dataclean.quality.segmenter import no_segmenter, segment_run, segmentable, segmenter_tables
from dataclean.quality.special_cases import special_cases

# Word styles (bits of `mode`): how another language's spaCy tokenizer differs from English's, as
# datatrove's tokenizer for the language behaves (probed by scripts/build_fineweb2_tables.py).
HAN_WORDS = 1  # every Han or kana character is a word (the Chinese rules)
ELISION = 2  # `l'uomo` -> `l'` `uomo` (it, fr, ca)
HYPHEN_LOWER = 4  # a hyphen between letters splits only before a lower-case letter (it)
NO_HYPHEN = 8  # a hyphen between letters never splits (es, de, pt, nl, sv, nb, hu, ro, ca)
BRACKETS = 16  # brackets, quotes and `,!?` between letters split (de, nl, sv, nb, hu, pl)
DIGIT_PERIOD = 32  # a period after a digit stays with it: `12.` (de, nb, hu)
NO_ENGLISH_SPECIALS = 64  # English's special cases (`dont` -> `do` `nt`, `can't`) do not apply
# Runs of Han characters are cut into jieba's words: with HAN_WORDS (Chinese) instead of one word per
# character; without it (English quoting Chinese) instead of one word per run, as spaCy's English has it
SEGMENT = 128
FRENCH = 256  # spaCy French's token_match, elision prefix, hyphen suffixes, special cases (fr)
KOREAN = 512  # Hangul cut from other characters, before a stop word, long stems in 2 (ko)
# SudachiPy's words, cut in Python and given to the rules as spans (dataclean.quality.japanese; ja)
SUDACHI = 1024
STYLES = {
    "segment": SEGMENT,
    "no_english_specials": NO_ENGLISH_SPECIALS,
    "elision": ELISION,
    "hyphen_lower": HYPHEN_LOWER,
    "no_hyphen": NO_HYPHEN,
    "brackets": BRACKETS,
    "digit_period": DIGIT_PERIOD,
    "french": FRENCH,
    "korean": KOREAN,
    "sudachi": SUDACHI,
}
Tables = tuple[Any, ...]


@lru_cache(maxsize=1)
def tokenizer_tables() -> Tables:
    """What the compiled tokenizer looks up: (special cases as a `hash_set`, their token-length
    offsets, token lengths, after-digit suffixes as a `hash_set`, the longest after-digit suffix,
    the special cases the affix rules cut apart as a `hash_set` of special-case indexes, how many
    pieces the affix rules make of each special case, the most characters of one of those, an
    empty `hash_set`, the French and Korean rules' tables packed in two arrays: `language_tables`).
    English's are the tuple's own members, as before French and Korean; theirs are one pair of
    arrays, so the tuple every chunk's call carries grew by two arrays, not by some thirty (which
    cost the English words about a fifth of their speed, and the stage about 2-3 s of compile CPU
    of the 7 the French and Korean rules added)."""
    specials, offsets, piece_lengths, split, pieces, longest = special_cases(TABLES / "spacy_en_specials.tsv")
    suffixes = (TABLES / "spacy_en_after_digit.txt").read_text(encoding="utf-8").split()
    return (
        specials,
        offsets,
        piece_lengths,
        hash_set(sorted({fnv_hash(p) for p in suffixes})),
        max(len(p) for p in suffixes),
        split,
        pieces,
        longest,
        hash_set([]),  # no special cases: another language's tokenizer (`NO_ENGLISH_SPECIALS`)
        language_tables(),
    )


def language_tables() -> tuple[np.ndarray, np.ndarray]:
    """The French and Korean rules' tables as a `Packer` packs them (French's slots, then Korean's)."""
    packer = Packer(LONGEST_ENDING + 1)
    pack_french(packer)
    pack_korean(packer)
    return packer.arrays()


@helper
def _is_digit(c):  # type: ignore[no-untyped-def]
    return 48 <= c <= 57


@helper
def _prefix_length(cps, s, e, flags):  # type: ignore[no-untyped-def]
    """spaCy's `find_prefix`: the first alternative of its prefix regex that matches at `s`."""
    c = cps[s]
    if c == 46:  # "\.\.+"
        k = s
        while k < e and cps[k] == 46:
            k += 1
        return k - s if k - s >= 2 else 0
    if c == 43:  # "\+(?![0-9])"
        return 0 if s + 1 < e and _is_digit(cps[s + 1]) else 1
    if flags[c] & F.PREFIX:
        return 1
    if c == 85 and e - s >= 3 and cps[s + 1] == 83 and cps[s + 2] == 36:  # US$
        return 3
    if (c == 67 or c == 65) and e - s >= 2 and cps[s + 1] == 36:  # C$ A$
        return 2
    return 0


@helper
def _suffix_length(cps, s, e, flags, after_digit, longest, mode):  # type: ignore[no-untyped-def]
    """spaCy's `find_suffix`: its suffix regex's leftmost match, which ends at `e`: the longest
    alternative that matches there."""
    n = e - s
    last = cps[e - 1]
    best = 0
    french = (mode & FRENCH) != 0
    if last == 46:
        k = e - 1
        while k >= s and cps[k] == 46:
            k -= 1
        run = e - 1 - k
        if run >= 2:
            best = run
        elif n >= 2:
            before = cps[e - 2]
            if (
                (french and french_before_period(flags, before))
                or (
                    not french
                    and flags[before] & F.BEFORE_PERIOD
                    and not (mode & DIGIT_PERIOD and _is_digit(before))
                )
                or (n >= 3 and (flags[before] & F.UPPER) and (flags[cps[e - 3]] & F.UPPER))
                or (n >= 3 and cps[e - 3] == 0xB0 and (before in (70, 102, 67, 99, 75, 107)))
            ):
                best = 1
    if n >= 2 and best < 2:
        a = cps[e - 2]
        possessive = not french and (a == 39 or a == 0x2019) and (last == 115 or last == 83)  # 's
        if (a == 0x2026 and last == 0x2026) or possessive:
            best = 2
    if best == 0 and (french_suffix_char(flags, last) if french else flags[last] & F.SUFFIX):
        best = 1
    if best == 0 and last == 43 and n >= 2 and _is_digit(cps[e - 2]):
        best = 1
    for size in range(longest, best, -1):
        if size < n and _is_digit(cps[e - size - 1]) and _find(after_digit, _fnv(cps, e - size, e)) >= 0:
            return size
    return best


@helper
def _host_and_rest(cps, h, e, flags):  # type: ignore[no-untyped-def]
    """URL_MATCH from the host on: `(label.)+tld(:port)?([/?#]\\S*)?$`."""
    q = h
    while q < e and cps[q] != 47 and cps[q] != 63 and cps[q] != 35 and cps[q] != 58:
        q += 1
    end = q
    dot = end - 1
    while dot >= h and cps[dot] != 46:
        dot -= 1
    if dot < h or end - dot - 1 < 2 or end - dot - 1 > 63:
        return False
    for i in range(dot + 1, end):
        if not flags[cps[i]] & F.LOWER:
            return False
    start = h
    for i in range(h, dot + 1):
        if cps[i] == 46:
            size = i - start
            if size < 1 or size > 64 or not flags[cps[start]] & F.HOST or not flags[cps[i - 1]] & F.HOST:
                return False
            for k in range(start + 1, i - 1):
                c = cps[k]
                if not (flags[c] & F.HOST) and c != 95 and c != 45:
                    return False
            start = i + 1
    if end == e or cps[end] != 58:
        return True
    digits = end + 1
    while digits < e and _is_digit(cps[digits]):
        digits += 1
    count = digits - end - 1
    return 2 <= count <= 5 and (digits == e or cps[digits] == 47 or cps[digits] == 63 or cps[digits] == 35)


@helper
def _is_url(cps, s, e, flags):  # type: ignore[no-untyped-def]
    """spaCy's URL_MATCH (optional scheme, optional `user@`, host, port, path), without the IP branch."""
    dot = False
    for i in range(s, e):
        if cps[i] == 46:
            dot = True
            break
    if not dot:  # every host has one
        return False
    for scheme in range(2):
        p = s
        if scheme == 0:
            q = s
            while q < e and ((flags[cps[q]] & F.WORD) or cps[q] == 43 or cps[q] == 45 or cps[q] == 46):
                q += 1
            if not (q - s >= 2 and q + 2 < e and cps[q] == 58 and cps[q + 1] == 47 and cps[q + 2] == 47):
                continue
            p = q + 3
        for at in range(e - 1, p, -1):
            if cps[at] == 64 and _host_and_rest(cps, at + 1, e, flags):
                return True
        if p < e and _host_and_rest(cps, p, e, flags):
            return True
    return False


@helper
def _alpha(flags, c):  # type: ignore[no-untyped-def]
    return flags[c] & F.ALPHA


@helper
def _infix_length(cps, s, p, e, flags, mode):  # type: ignore[no-untyped-def]
    """Length of spaCy's infix regex match at `p` (its first matching alternative), 0 for none,
    -1 for an empty match (a cut before `p`: the elision infix of it/fr/ca)."""
    c = cps[p]
    if (
        mode & ELISION
        and p - s >= 2
        and (cps[p - 1] == 39 or cps[p - 1] == 0x2019)
        and _alpha(flags, cps[p - 2])
        and (_alpha(flags, c) or (_is_digit(c) and not mode & FRENCH))  # French: a letter only
    ):
        return -1
    if c == 46 and p + 1 < e and cps[p + 1] == 46:
        k = p
        while k < e and cps[k] == 46:
            k += 1
        return k - p
    if c == 0x2026 or flags[c] & F.ICON:
        return 1
    if p == s or p + 1 >= e:
        return 0
    before, after = cps[p - 1], cps[p + 1]
    if _is_digit(before) and (c == 43 or c == 45 or c == 42 or c == 94) and (_is_digit(after) or after == 45):
        return 1
    if c == 46 and (flags[before] & (F.LOWER | F.QUOTE)) and (flags[after] & (F.UPPER | F.QUOTE)):
        return 1
    if c == 44 and _alpha(flags, before) and _alpha(flags, after):
        return 1
    if (
        mode & BRACKETS
        and _alpha(flags, before)
        and _alpha(flags, after)
        and (
            c == 40 or c == 41 or c == 91 or c == 93 or c == 33 or c == 63 or (flags[c] & F.QUOTE and c != 39)
        )
    ):
        return 1
    if not (_alpha(flags, before) or _is_digit(before)):
        return 0
    # French's hyphen infix wants a letter before it (English's a letter or a digit)
    hyphens = not mode & NO_HYPHEN and not (mode & FRENCH and _is_digit(before))
    if hyphens and (c == 45 or c == 0x2014):  # "-", "--", "---"; "—", "——"
        limit = 3 if c == 45 else 2
        k = p
        while k < e and k - p < limit and cps[k] == c:
            if k + 1 < e and _hyphen_follows(flags, cps[k + 1], mode):
                return k + 1 - p
            k += 1
        return 0
    if hyphens and (c == 0x2013 or c == 126) and _hyphen_follows(flags, after, mode):
        return 1
    if (c == 58 or c == 60 or c == 62 or c == 61 or c == 47) and _alpha(flags, after):
        return 1
    return 0


@helper
def _hyphen_follows(flags, c, mode):  # type: ignore[no-untyped-def]
    """Whether a hyphen before `c` is an infix: before a letter (a lower-case one in `HYPHEN_LOWER`)."""
    return (flags[c] & F.LOWER) != 0 if mode & HYPHEN_LOWER else _alpha(flags, c) != 0


@helper
def _emit(out, n, s, e):  # type: ignore[no-untyped-def]
    out[n, 0] = s
    out[n, 1] = e
    return n + 1


@helper
def _emit_special(out, n, s, index, offsets, lengths):  # type: ignore[no-untyped-def]
    for k in range(offsets[index], offsets[index + 1]):
        n = _emit(out, n, s, s + lengths[k])
        s += lengths[k]
    return n


@helper
def tokenize_chunk(cps, s, e, flags, tables, out, n, stack, mode):  # type: ignore[no-untyped-def]
    """Append the tokens of chunk `cps[s:e]` (no whitespace in it) to `out` (rows of start, end)
    from row `n`; returns the new row count. `stack` is scratch for the suffixes (rows); `mode`
    the word style bits."""
    specials, offsets, lengths, after_digit, longest = tables[0], tables[1], tables[2], tables[3], tables[4]
    french = (mode & FRENCH) != 0
    fr = tables[9]
    if french:  # French's special cases, not English's
        specials = packed_set(fr, np.int64(FR.SPECIALS))
        offsets = packed_ints(fr, np.int64(FR.SPECIAL_OFFSETS))
        lengths = packed_ints(fr, np.int64(FR.SPECIAL_LENGTHS))
    elif mode & NO_ENGLISH_SPECIALS:
        specials = tables[8]  # an empty set
    first = n
    index = _find(specials, _fnv(cps, s, e))
    if index >= 0:
        return _emit_special(out, n, s, index, offsets, lengths)
    suffixes = 0
    last = -1
    while s < e and e - s != last:
        if french and french_token_match(cps, s, e, flags, fr):
            break
        if last >= 0 and _find(specials, _fnv(cps, s, e)) >= 0:
            break
        last = e - s
        pre = _prefix_length(cps, s, e, flags)
        if pre == 0 and french:
            pre = french_prefix(cps, s, e, flags, fr)
        if pre and s + pre < e and _find(specials, _fnv(cps, s + pre, e)) >= 0:
            n = _emit(out, n, s, s + pre)
            s += pre
            break
        suf = _suffix_length(cps, s + pre, e, flags, after_digit, longest, mode) if s + pre < e else 0
        if french and s + pre < e:
            suf = max(suf, french_suffix(cps, s + pre, e, flags, fr))
        if suf and e - suf > s and _find(specials, _fnv(cps, s, e - suf)) >= 0:
            stack[suffixes, 0] = e - suf
            stack[suffixes, 1] = e
            suffixes += 1
            e -= suf
            break
        if pre:
            n = _emit(out, n, s, s + pre)
            s += pre
        if suf:
            stack[suffixes, 0] = e - suf
            stack[suffixes, 1] = e
            suffixes += 1
            e -= suf
    if s < e:
        index = _find(specials, _fnv(cps, s, e))
        if index >= 0:
            n = _emit_special(out, n, s, index, offsets, lengths)
        elif (french and french_token_match(cps, s, e, flags, fr)) or _is_url(cps, s, e, flags):
            n = _emit(out, n, s, e)
        else:
            start = s
            p = s
            while p < e:
                size = _infix_length(cps, s, p, e, flags, mode)
                if size == 0:
                    p += 1
                    continue
                if size < 0:  # an empty infix: the text before it is a token
                    if p != start:
                        n = _emit(out, n, start, p)
                    start = p
                    p += 1
                    continue
                if p != s:
                    if p != start:
                        n = _emit(out, n, start, p)
                    n = _emit(out, n, p, p + size)
                    start = p + size
                p += size
            if start < e:
                n = _emit(out, n, start, e)
    for k in range(suffixes - 1, -1, -1):
        n = _emit(out, n, stack[k, 0], stack[k, 1])
    if n - first >= 2 and french:
        split = packed_set(fr, np.int64(FR.SPECIAL_SPLIT))
        pieces = packed_ints(fr, np.int64(FR.SPECIAL_PIECES))
        longest_split = packed_value(fr, np.int64(FR.LONGEST_SPLIT))
        n = _merge_specials(cps, offsets, lengths, split, pieces, longest_split, out, first, n, stack)
    elif n - first >= 2 and not mode & NO_ENGLISH_SPECIALS:
        n = _merge_specials(cps, tables[1], tables[2], tables[5], tables[6], tables[7], out, first, n, stack)
    return n


@helper
def _merge_specials(cps, offsets, lengths, split, pieces, longest, out, first, n, stack):  # type: ignore[no-untyped-def]
    """spaCy's second pass: a run of a chunk's tokens that spells a special case the affix rules
    cut apart becomes that special case's tokens (the longest run first, from the left; the
    special cases of `special_cases`, their token lengths by `offsets` and `lengths`)."""
    count = n - first
    for k in range(count):
        stack[k, 0] = out[first + k, 0]
        stack[k, 1] = out[first + k, 1]
    w = first
    k = 0
    while k < count:
        merged = False
        for j in range(min(count, k + 12) - 1, k, -1):
            s, e = stack[k, 0], stack[j, 1]
            if e - s > longest:
                continue
            found = _find(split, _fnv(cps, s, e))
            if found >= 0 and pieces[found] == j - k + 1:
                w = _emit_special(out, w, s, found, offsets, lengths)
                k = j + 1
                merged = True
                break
        if not merged:
            w = _emit(out, w, stack[k, 0], stack[k, 1])
            k += 1
    return w


@helper
def tokenize(cps, s, e, flags, tables, mode, out, stack, seg):  # type: ignore[no-untyped-def]
    """The tokens of `cps[s:e]` into `out` (rows of start, end); returns their count. `mode`: the
    word style bits; with `HAN_WORDS` every Han/kana character is a token of its own, and with
    `SEGMENT` too runs of Han characters are jieba's words (`seg`: the segmenter's tables and
    scratch, `dataclean.quality.segmenter`)."""
    n = np.int64(0)  # not 0: numba would compile tokenize_chunk again for the literal
    han = mode & HAN_WORDS
    words = (mode & SEGMENT) != 0 and len(seg[0][0]) > 1
    i = s
    while i < e:
        while i < e and flags[cps[i]] & F.SPACE:
            i += 1
        if i >= e:
            break
        # `SEGMENT` without `HAN_WORDS` (English): runs of Han characters are jieba's words, kana
        # and everything else is cut as the table's tokenizer cuts it
        if (han and flags[cps[i]] & F.HAN) or (words and segmentable(cps[i])):
            if words and segmentable(cps[i]):
                j = i
                while j < e and segmentable(cps[j]):
                    j += 1
                n = segment_run(cps, i, j, seg[0], out, n, seg[1], seg[2], seg[3], seg[4])
                i = j
                continue
            n = _emit(out, n, i, i + 1)
            i += 1
            continue
        j = i
        while (
            j < e
            and not (flags[cps[j]] & F.SPACE)
            and not (han and flags[cps[j]] & F.HAN)
            and not (words and segmentable(cps[j]))
        ):
            j += 1
        first = n
        n = tokenize_chunk(cps, i, j, flags, tables, out, n, stack, mode)
        if mode & KOREAN:
            n = korean_words(cps, out, first, n, stack, tables[9])
        i = j
    return n


@numba.njit(cache=True, nogil=True)
def _words_kernel(cps, flags, tables, mode, out, stack, seg):  # type: ignore[no-untyped-def]
    return tokenize(cps, 0, len(cps), flags, tables, mode, out, stack, seg)


def segmenter_scratch(longest: int, needed: bool) -> tuple[Any, ...]:
    """The segmenter's tables (none when not `needed`: no Han text) and its scratch for runs of up
    to `longest` characters, as `tokenize` takes them."""
    size = longest + 1 if needed else 1
    return (
        segmenter_tables() if needed else no_segmenter(),
        np.empty(size, np.float64),
        np.empty(size, np.int64),
        np.empty((size, 4), np.float64),
        np.empty((size, 4), np.int64),
    )


def words(text: str, han: bool = False, style: int = 0) -> list[str]:
    """The words of one text, as the quality rules count them (see the module docstring);
    `style`: word style bits (`ELISION`, ...)."""
    cps = np.array([ord(ch) for ch in text], np.uint32)
    out = np.empty((max(1, len(cps)), 2), np.int64)
    stack = np.empty((max(1, len(cps)), 2), np.int64)
    mode = np.int64(style | (HAN_WORDS if han else 0))
    seg = segmenter_scratch(len(cps), han or bool(style & SEGMENT))
    n = _words_kernel(cps, F.char_classes(), tokenizer_tables(), mode, out, stack, seg)
    return [text[int(a) : int(b)] for a, b in out[:n]]
