"""The rules of spaCy's French tokenizer that its English one lacks, compiled with numba.

datatrove counts the words of French (and of the languages it tokenizes as French) with spaCy's
blank `fr` tokenizer. Where it cuts differently from English's, word counts (and the Gopher
rules' ratios over them) differ, so the quality tokenizer applies these rules in the `french`
word style (`dataclean.quality.tokenizer.FRENCH`), from tables `scripts/build_spacy_french.py`
asks spaCy for (`dataclean/data/quality/spacy_fr/`, spaCy 3.8, MIT):

- its `token_match`: a word that begins with one of ~200 prefixes and a hyphen (`grand-père`,
  `Saint-Étienne`, `arrière-pays`), with an elided prefix (`entr'ouvert`), one of ~50 compounds
  (`new-york`, `hip-hop`) or `X-de-Y` (`saut-de-ski`) is one token, case ignored, checked before
  each affix is cut and before infixes, as spaCy does (`french_token_match`);
- its elision prefix: `d'`, `l'`, `n'` before a letter are cut off first (`french_prefix`), so
  `l'arrière-pays` is `l'` `arrière-pays`;
- its hyphen suffixes: a pronoun after a hyphen is cut off (`dit-il` -> `dit` `-il`;
  `french_suffix`);
- its special cases (`peut-être`, `aujourd'hui`, `a-t-il` -> `a` `-t` `-il`) instead of
  English's (`dataclean.quality.special_cases`).

The compiled helpers take the tables as `fr`, one pair of flat arrays (`pack_french`'s slots of
a `dataclean.quality.hashing.Packer`), not a tuple of one array per table: every chunk's call
carries them, whatever its language.
"""

# numba kernels compute on numpy scalars, which mypy sees as Any here.
# mypy: disable-error-code="no-any-return"

from __future__ import annotations

import json

import numpy as np

from dataclean.jit import helper
from dataclean.quality import chars as F
from dataclean.quality.chars import TABLES
from dataclean.quality.hashing import (
    FNV_OFFSET,
    FNV_PRIME,
    Packer,
    _find,
    _fnv,
    fnv_hash,
    hash_set,
    packed_ints,
    packed_set,
    packed_value,
)
from dataclean.quality.special_cases import special_cases

FOLDER = TABLES / "spacy_fr"
# What must follow a literal of `token_match.json` (bits, one per literal).
TAILS = {"letters": 1, "letters1": 2, "word": 4}
_LOWERED = 0x250  # the literals are Latin: case is folded below this code point only


# Where `pack_french` puts the French tables (slots of a `dataclean.quality.hashing.Packer`).
LITERALS, LITERAL_TAILS, LONGEST_LITERAL, COMBINATIONS, HYPHEN_SUFFIXES, LONGEST_SUFFIX = range(6)
LOWER, HYPHENS, ELISIONS = range(6, 9)
SPECIALS, SPECIAL_OFFSETS, SPECIAL_LENGTHS, SPECIAL_SPLIT, SPECIAL_PIECES, LONGEST_SPLIT = range(9, 15)
SLOTS = 15


def pack_french(packer: Packer) -> None:
    """What the French rules look up, into `packer`'s slots `0`..`SLOTS - 1`: the literals as a
    `hash_set`, each literal's tail bit, the longest literal, the `X-de-Y` middles as a
    `hash_set`, the hyphen suffixes as a `hash_set`, the longest of those, lower case by code
    point below `_LOWERED`, the hyphen characters, the apostrophes, the special cases as
    `special_cases` gives them."""
    rules = json.loads((FOLDER / "token_match.json").read_text(encoding="utf-8"))
    literals = list(rules["literals"].items())
    lower = np.array(
        [ord(chr(c).lower()) if len(chr(c).lower()) == 1 else c for c in range(_LOWERED)], np.int64
    )
    packer.set(LITERALS, hash_set([fnv_hash(text) for text, _tail in literals]))
    packer.array(LITERAL_TAILS, np.array([TAILS[tail] for _text, tail in literals], np.int64))
    packer.value(LONGEST_LITERAL, max(len(text) for text, _tail in literals))
    packer.set(COMBINATIONS, hash_set([fnv_hash(text) for text in rules["combinations"]]))
    packer.set(HYPHEN_SUFFIXES, hash_set([fnv_hash(text) for text in rules["hyphen_suffixes"]]))
    packer.value(LONGEST_SUFFIX, max(len(text) for text in rules["hyphen_suffixes"]))
    packer.array(LOWER, lower)
    packer.array(HYPHENS, np.array([ord(ch) for ch in rules["hyphens"]], np.int64))
    packer.array(ELISIONS, np.array([ord(ch) for ch in rules["elisions"]], np.int64))
    specials, offsets, lengths, split, pieces, longest = special_cases(FOLDER / "specials.tsv")
    packer.set(SPECIALS, specials)
    packer.array(SPECIAL_OFFSETS, offsets)
    packer.array(SPECIAL_LENGTHS, lengths)
    packer.set(SPECIAL_SPLIT, split)
    packer.array(SPECIAL_PIECES, pieces)
    packer.value(LONGEST_SPLIT, longest)


@helper
def _lower(fr, c):  # type: ignore[no-untyped-def]
    lower = packed_ints(fr, np.int64(LOWER))
    return lower[c] if c < len(lower) else c


@helper
def _hyphen(fr, c):  # type: ignore[no-untyped-def]
    return _one_of(packed_ints(fr, np.int64(HYPHENS)), c)


@helper
def _elision(fr, c):  # type: ignore[no-untyped-def]
    return _one_of(packed_ints(fr, np.int64(ELISIONS)), c)


@helper
def _one_of(chars, c):  # type: ignore[no-untyped-def]
    i = 0
    while i < len(chars) and chars[i] != c:
        i += 1
    return i < len(chars)


@helper
def _cased(flags, c):  # type: ignore[no-untyped-def]
    """spaCy's ALPHA_LOWER under its pattern's ignore-case flag: a letter with a case."""
    return (flags[c] & (F.LOWER | F.UPPER)) != 0


@helper
def _tail(cps, k, e, flags, tail, fr):  # type: ignore[no-untyped-def]
    """Whether `cps[k:e]` is what `tail` (a `TAILS` bit) asks to follow a literal."""
    if tail != 1 and (k >= e or not _cased(flags, cps[k])):
        return False
    for i in range(k, e):
        c = cps[i]
        if not (_cased(flags, c) or (tail == 4 and (_hyphen(fr, c) or _elision(fr, c)))):
            return False
    return True


@helper
def _letters(cps, k, e, flags):  # type: ignore[no-untyped-def]
    """One or more letters (spaCy's ALPHA) and nothing else."""
    i = k
    while i < e and flags[cps[i]] & F.ALPHA:
        i += 1
    return k < e and i == e


@helper
def _combination(cps, s, e, flags, fr):  # type: ignore[no-untyped-def]
    """`^[ALPHA]+-MIDDLE-(?:l')?[ALPHA]+$`, MIDDLE one of `de`, `sur`, `saint`... (`saut-de-ski`)."""
    first = s
    while first < e and flags[cps[first]] & F.ALPHA:
        first += 1
    if first == s or first >= e or not _hyphen(fr, cps[first]):
        return False
    second = first + 1
    value = np.uint64(FNV_OFFSET)
    while second < e and not _hyphen(fr, cps[second]):
        value = (value ^ np.uint64(_lower(fr, cps[second]))) * np.uint64(FNV_PRIME)
        second += 1
    if second >= e or second == first + 1 or _find(packed_set(fr, np.int64(COMBINATIONS)), value) < 0:
        return False
    rest = second + 1
    if _letters(cps, rest, e, flags):
        return True
    return (
        rest + 2 < e
        and _lower(fr, cps[rest]) == 108  # l
        and _elision(fr, cps[rest + 1])
        and _letters(cps, rest + 2, e, flags)
    )


@helper
def french_token_match(cps, s, e, flags, fr):  # type: ignore[no-untyped-def]
    """Whether spaCy French's `token_match` keeps `cps[s:e]` as one token: a literal of
    `token_match.json` (case ignored) and its tail, or `X-de-Y`."""
    found = False
    for i in range(s, e):  # every pattern holds a hyphen or an apostrophe
        if _hyphen(fr, cps[i]) or _elision(fr, cps[i]):
            found = True
            break
    if not found:
        return False
    literals = packed_set(fr, np.int64(LITERALS))
    tails = packed_ints(fr, np.int64(LITERAL_TAILS))
    value = np.uint64(FNV_OFFSET)
    for k in range(s, min(e, s + packed_value(fr, np.int64(LONGEST_LITERAL)))):
        value = (value ^ np.uint64(_lower(fr, cps[k]))) * np.uint64(FNV_PRIME)
        index = _find(literals, value)
        if index >= 0 and _tail(cps, k + 1, e, flags, tails[index], fr):
            return True
    return _combination(cps, s, e, flags, fr)


@helper
def french_prefix(cps, s, e, flags, fr):  # type: ignore[no-untyped-def]
    """spaCy French's elision prefix `(d|l|n|D|L|N)['’](?=[ALPHA])`: 2, else 0."""
    c = cps[s]
    if (
        e - s >= 3
        and (c == 100 or c == 108 or c == 110 or c == 68 or c == 76 or c == 78)
        and _elision(fr, cps[s + 1])
        and flags[cps[s + 2]] & F.ALPHA
    ):
        return 2
    return 0


@helper
def french_suffix(cps, s, e, flags, fr):  # type: ignore[no-untyped-def]
    """spaCy French's hyphen suffix `(?<=[ALPHA])[HYPHENS](ce|il|elle|...)$`: its length, else 0
    (the longest first: spaCy takes the leftmost match)."""
    for size in range(min(packed_value(fr, np.int64(LONGEST_SUFFIX)), e - s - 2), 0, -1):
        h = e - size - 1
        hyphen = _hyphen(fr, cps[h]) and flags[cps[h - 1]] & F.ALPHA
        if hyphen and _find(packed_set(fr, np.int64(HYPHEN_SUFFIXES)), _fnv(cps, e - size, e)) >= 0:
            return size + 1
    return 0


@helper
def french_before_period(flags, c):  # type: ignore[no-untyped-def]
    """Whether spaCy French cuts a final period after `c`: `(?<=[0-9{ALPHA_LOWER}%²\\-+(?:){QUOTES}])`
    (English's class has punctuation where French's has digits)."""
    return (
        (48 <= c <= 57)
        or (flags[c] & (F.LOWER | F.QUOTE)) != 0
        or c == 37  # %
        or c == 178  # ²
        or c == 45  # -
        or c == 43  # +
        or c == 40  # ( ? : ) are in the class by the way spaCy writes it
        or c == 63
        or c == 58
        or c == 41
    )


@helper
def french_suffix_char(flags, c):  # type: ignore[no-untyped-def]
    """Whether `c` alone is a suffix for spaCy French: English's one-character suffixes but the
    icons, `–` and `—`."""
    return (flags[c] & F.SUFFIX) != 0 and not (flags[c] & F.ICON) and c != 0x2013 and c != 0x2014
