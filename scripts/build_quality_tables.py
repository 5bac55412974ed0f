"""Build the quality stage's tokenizer tables from spaCy's English tokenizer and datatrove's sets.

    python scripts/build_quality_tables.py   # needs the bench extra (spacy, datatrove)

Writes `dataclean/data/quality/`:
- `char_classes.npz`: one uint32 of flags per code point (see `dataclean.quality.chars`), each
  flag computed by asking spaCy's (or datatrove's, or Python's) own regex or set about that one
  character, so the compiled tokenizer classifies characters exactly as they do;
- `spacy_en_specials.tsv`: spaCy's English tokenizer exceptions (`don't` -> `do` + `n't`, `a.m.`,
  emoticons), one per line: the string, the lengths of its tokens, and how many tokens
  spaCy's affix rules alone make of it when it finds such a case after splitting (else 0);
- `spacy_en_after_digit.txt`: the suffixes spaCy splits only after a digit (units, currencies).
Run it again after upgrading spaCy or datatrove; the tables are committed, so neither is needed
at run time.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "dataclean" / "data" / "quality"
sys.path.insert(0, str(OUT.parent.parent.parent))

from spacy_specials import special_case_lines  # noqa: E402  (a sibling script module)

from dataclean.quality import chars as F  # noqa: E402


def main() -> None:
    import spacy
    from datatrove.utils.text import PUNCTUATION_SET, TERMINAL_PUNCTUATION
    from spacy.lang import char_classes as cc
    from spacy.pipeline import Sentencizer

    nlp = spacy.blank("en")
    tokenizer = nlp.tokenizer
    classes = {
        F.ALPHA: re.compile(f"[{cc.ALPHA}]"),
        F.LOWER: re.compile(f"[{cc.ALPHA_LOWER}]"),
        F.UPPER: re.compile(f"[{cc.ALPHA_UPPER}]"),
        F.QUOTE: re.compile(f"[{cc.CONCAT_QUOTES}]"),
        F.ICON: re.compile(f"[{cc.CONCAT_ICONS}]"),
        # The look-behind of spaCy's suffix rule for a period: [0-9{al}{e}{p}(?:{q})].
        F.BEFORE_PERIOD: re.compile(
            r"[0-9{al}{e}{p}(?:{q})]".format(al=cc.ALPHA_LOWER, e=r"%²\-\+", q=cc.CONCAT_QUOTES, p=cc.PUNCT)
        ),
        F.HOST: re.compile("[A-Za-z0-9\u00a1-\uffff]"),
        F.WORD: re.compile(r"\w"),
    }
    sentence_ends = set(Sentencizer.default_punct_chars)
    flags = np.zeros(0x110000, np.uint32)
    for code in range(0x110000):
        if 0xD800 <= code <= 0xDFFF:
            continue
        ch = chr(code)
        value = 0
        for flag, pattern in classes.items():
            if pattern.fullmatch(ch):
                value |= flag
        if ch.isspace():
            value |= F.SPACE
        if ch.isalpha():
            value |= F.IS_ALPHA
        prefix = tokenizer.prefix_search(ch)
        if prefix is not None and prefix.end() == 1 and ch != "+":
            value |= F.PREFIX
        suffix = tokenizer.suffix_search(ch)
        if suffix is not None and suffix.end() - suffix.start() == 1:
            value |= F.SUFFIX
        if ch in PUNCTUATION_SET:
            value |= F.PUNCTUATION
        if ch in TERMINAL_PUNCTUATION:
            value |= F.TERMINAL
        if unicodedata.category(ch).startswith("P"):
            value |= F.P_CATEGORY
        if ch in sentence_ends:
            value |= F.SENTENCE_END
        if len(("a" + ch + "b").splitlines()) > 1:
            value |= F.LINE_BREAK
        if F.is_han_or_kana(code):
            value |= F.HAN
        flags[code] = value
    np.savez_compressed(OUT / "char_classes.npz", flags=flags)

    lines = special_case_lines(tokenizer, keep_token_match=False)
    (OUT / "spacy_en_specials.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    after_digit = sorted(
        {piece.replace("\\", "") for piece in (cc.UNITS + "|" + cc.CURRENCY).split("|") if piece}
    )
    (OUT / "spacy_en_after_digit.txt").write_text("\n".join(after_digit) + "\n", encoding="utf-8")
    print(f"{len(lines)} special cases, {len(after_digit)} after-digit suffixes")


if __name__ == "__main__":
    main()
