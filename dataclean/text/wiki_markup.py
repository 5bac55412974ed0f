"""MediaWiki language-conversion markup (`-{...}-`), resolved the way a Simplified-Chinese reader
of Chinese Wikipedia sees the page.

Chinese Wikipedia writes one text for several variants and marks what differs:
`-{zh-cn:克什米尔; zh-tw:喀什米尔}-` shows the mainland form to a zh-cn reader, `-{Gtk#}-` shows its
text unconverted, `-{T|Gtk#}-` sets the page's display title and `-{H|...}-` adds a conversion
rule (neither shows anything where it stands). Dumps and datasets built from them (CMRC 2018, for
one) keep the markup, which then reads as symbols and non-words. `resolve_conversion_markup`
replaces each block by what it shows (MediaWiki's LanguageConverter, flags from
https://www.mediawiki.org/wiki/Writing_systems/Syntax):
- variants (`code:text;` pairs): the `zh-cn` text, else `zh-hans`, else `zh-sg`/`zh-my`, else
  `zh`, else the first;
- flags `T` (title), `H` (hidden rule) and `-` (rule removal) show nothing: the block goes;
- `R` (raw) and no flag show the text as written; `A` and `D` show the chosen variant.
Blocks are not nested in practice; a `-{` without its `}-` on the same line is left as it is.
"""

from __future__ import annotations

import re

# -{flags|content}- on one line; flags are a few letters, `-` or `;`.
_BLOCK = re.compile(r"-\{(?:([A-Za-z\-;\s]{1,8})\|)?([^{}\n]*?)\}-")
_VARIANT = re.compile(r"^\s*(zh(?:-[a-z]{2,4})?)\s*:(.*)$", re.S)
_PREFERRED = ("zh-cn", "zh-hans", "zh-sg", "zh-my", "zh")
_SILENT = frozenset("TH-")


def _variants(content: str) -> dict[str, str] | None:
    """The `code:text` pairs of a block's content (in order), or None when it is plain text."""
    found: dict[str, str] = {}
    for part in content.split(";"):
        if not part.strip():
            continue
        match = _VARIANT.match(part)
        if match is None:
            return None
        found.setdefault(match.group(1), match.group(2).strip())
    return found or None


def _shown(match: re.Match[str]) -> str:
    flags, content = match.group(1) or "", match.group(2)
    if _SILENT & set(flags.replace(" ", "").replace(";", "")):
        return ""
    variants = None if "R" in flags else _variants(content)
    if variants is None:
        return content
    for code in _PREFERRED:
        if code in variants:
            return variants[code]
    return next(iter(variants.values()))


def resolve_conversion_markup(text: str) -> tuple[str, int]:
    """(`text` with every `-{...}-` block replaced by what it shows, how many blocks there were)."""
    if "-{" not in text:
        return text, 0
    return _BLOCK.subn(_shown, text)
