"""spaCy's tokenizer exceptions ("special cases") as the quality tables store them, for the
scripts that build those tables from spaCy (build_quality_tables.py for English,
build_spacy_french.py for French): one line per exception, tab-separated: the text, its tokens'
lengths, and how many tokens the affix rules alone make of it when spaCy finds it after
splitting (else 0).

spaCy also finds, after splitting, the special cases that its affix rules cut apart (`Co.` in
`(Co.)`, `):`): the third field is how many tokens the affix rules alone make of them, 0 for the
others (its `_special_matcher`, which it fills the same way).
"""

from __future__ import annotations

from typing import Any


def special_case_lines(tokenizer: Any, keep_token_match: bool) -> list[str]:
    """The exceptions of spaCy `tokenizer`, sorted; `keep_token_match`: the affix-only tokenizer
    keeps the language's `token_match` (French's hyphenated words), as spaCy's own does."""
    from spacy.tokenizer import Tokenizer

    bare = Tokenizer(
        tokenizer.vocab,
        rules={},
        prefix_search=tokenizer.prefix_search,
        suffix_search=tokenizer.suffix_search,
        infix_finditer=tokenizer.infix_finditer,
        token_match=tokenizer.token_match if keep_token_match else None,
        url_match=tokenizer.url_match,
    )
    lines = []
    for text, tokens in sorted(tokenizer.rules.items()):
        if any(ch.isspace() for ch in text):
            continue  # chunks never hold whitespace
        lengths = [len(token[65]) for token in tokens]  # 65: ORTH
        assert sum(lengths) == len(text), text
        split = tokenizer.find_prefix(text) or tokenizer.find_infix(text) or tokenizer.find_suffix(text)
        pieces = len(bare(text)) if split else 0
        lines.append(text + "\t" + ",".join(map(str, lengths)) + "\t" + str(pieces))
    return lines
