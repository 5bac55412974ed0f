"""Build the French word rules of the quality tokenizer from spaCy's French tokenizer.

    python scripts/build_spacy_french.py   # needs spaCy (the bench or test extra)

datatrove counts French words (and those of the languages it tokenizes as French) with spaCy's
blank `fr` tokenizer, which differs from the English one in rules that change word counts. This
asks spaCy 3.8 (MIT, explosion/spaCy) for them and writes `dataclean/data/quality/spacy_fr/`:

- `token_match.json`: spaCy French's `TOKEN_MATCH` (`spacy/lang/fr/tokenizer_exceptions.py`), the
  words it never cuts, as literals and tails (no regex at run time): `literals` maps each string a
  kept word may start with (lower case: the regex ignores case; `grand-`, `saint-`, `entr'`,
  `new-york`), every spelling of each pattern expanded, to the tail that must follow (`letters`:
  zero or more cased letters; `letters1`: one or more; `word`: a cased letter, then cased letters,
  hyphens and apostrophes); `combinations`: the middle words of `X-de-Y` (`saut-de-ski`);
  `hyphen_suffixes`: the pronouns spaCy French cuts off after a hyphen (`dit-il` -> `dit` `-il`);
  `hyphens` and `elisions`: its HYPHENS and ELISION characters.
- `specials.tsv`: its tokenizer exceptions (`peut-être`, `J.-C.`, `a-t-il` -> `a` `-t` `-il`), as
  `dataclean/data/quality/spacy_en_specials.tsv` holds English's.
Run it again after upgrading spaCy; the files are committed, so spaCy is not needed at run time.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

from spacy_specials import special_case_lines  # a sibling script module

OUT = Path(__file__).resolve().parent.parent / "dataclean" / "data" / "quality" / "spacy_fr"

try:  # Python 3.11+
    import re._parser as sre_parse  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover
    import sre_parse  # type: ignore[no-redef]


def expand(pattern: str) -> list[str]:
    """Every string a finite regex (literals, small classes, `?`, groups, alternatives) matches."""

    def sequence(items: Any) -> list[str]:
        found = [""]
        for op, arg in items:
            found = [a + b for a in found for b in node(op, arg)]
        return found

    def node(op: Any, arg: Any) -> list[str]:
        name = str(op)
        if name == "LITERAL":
            return [chr(arg)]
        if name == "IN":
            out: list[str] = []
            for kind, value in arg:
                if str(kind) == "LITERAL":
                    out.append(chr(value))
                elif str(kind) == "RANGE":
                    out.extend(chr(c) for c in range(value[0], value[1] + 1))
                else:
                    raise ValueError(f"{pattern}: {kind}")
            return out
        if name in ("MAX_REPEAT", "MIN_REPEAT"):
            low, high, sub = arg
            if high > 4:
                raise ValueError(f"{pattern}: unbounded repeat")
            body = sequence(sub)
            return ["".join(p) for k in range(low, high + 1) for p in itertools.product(body, repeat=k)]
        if name == "SUBPATTERN":
            return sequence(arg[-1])
        if name == "BRANCH":
            return [s for alternative in arg[1] for s in sequence(alternative)]
        raise ValueError(f"{pattern}: {name}")

    return sequence(sre_parse.parse(pattern))


def token_match() -> dict[str, Any]:
    """spaCy French's TOKEN_MATCH as literals with tails (see the module docstring)."""
    from spacy.lang.char_classes import ALPHA_LOWER
    from spacy.lang.fr import punctuation
    from spacy.lang.fr import tokenizer_exceptions as fr

    hyphen, elision, lower = f"[{fr.HYPHENS}]", f"[{fr.ELISION}]", f"[{ALPHA_LOWER}]"
    tails = {
        f"{lower}[{fr.HYPHENS}{ALPHA_LOWER}{fr.ELISION}]*": "word",
        f"{lower}+": "letters1",
        f"{lower}*": "letters",
    }
    combination = re.compile(r"^\^\[[^\]]+\]\+" + re.escape(hyphen) + r"(.*?)" + re.escape(hyphen))
    literals: dict[str, str] = {}
    combinations: list[str] = []
    for regex in fr._regular_exp:
        found = combination.match(regex)
        if found:  # ^[ALPHA]+[-]COMBO[-](?:l['])?[ALPHA]+$
            combinations.extend(s.lower() for s in expand(found.group(1)))
            continue
        assert regex.startswith("^") and regex.endswith("$"), regex
        body = regex[1:-1]
        tail = next(t for t in tails if body.endswith(t))
        for text in expand(body[: -len(tail)]):
            key = text.lower()
            assert literals.get(key, tails[tail]) == tails[tail], key
            literals[key] = tails[tail]
    assert "," not in elision + hyphen
    return {
        "source": "spaCy 3.8 (MIT), spacy/lang/fr/tokenizer_exceptions.py TOKEN_MATCH, punctuation.py",
        "hyphens": fr.HYPHENS,
        "elisions": fr.ELISION,
        "literals": dict(sorted(literals.items())),
        "combinations": sorted(set(combinations)),
        "hyphen_suffixes": punctuation._hyphen_suffixes.split(),
    }


def specials() -> list[str]:
    """spaCy French's tokenizer exceptions, one line each (`spacy_specials`)."""
    import spacy

    return special_case_lines(spacy.blank("fr").tokenizer, keep_token_match=True)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    rules = token_match()
    (OUT / "token_match.json").write_text(json.dumps(rules, ensure_ascii=False, indent=1) + "\n", "utf-8")
    lines = specials()
    (OUT / "specials.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    counts = f"{len(rules['literals'])} literals, {len(rules['combinations'])} middles"
    print(f"{counts}, {len(lines)} special cases -> {OUT}")


if __name__ == "__main__":
    main()
