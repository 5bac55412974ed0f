"""Junk built from real text, to check that the quality rules catch what they are meant to catch.

Each builder takes real passages (Chinese Wikipedia paragraphs, a novel's paragraphs, English
prose) and a seeded random generator, and returns one document of a kind the rules must drop:
- `repeated_sentence`: one of the passage's sentences repeated 10-40 times in a row;
- `duplicated_paragraphs`: a few paragraphs, each repeated 3-10 times;
- `dominating_phrase`: a 2-4 character (or one-word) phrase of the passage stuffed after every
  sentence and clause until it makes up about a third of the text;
- `line_list`: 20-60 short lines without punctuation, cut from the passage (a navigation menu);
and `english_trips` returns English documents built to trip each of datatrove's rules.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

_CLAUSE = re.compile(r"(?<=[。！？；，.!?;,])")
_SENTENCE = re.compile(r"(?<=[。！？.!?])")
_PUNCTUATION = re.compile(r"[\s\W_]+")


def sentences(text: str) -> list[str]:
    """`text` cut after each sentence-final mark (Chinese or Latin), blanks left out."""
    return [part for part in _SENTENCE.split(text) if part.strip()]


def repeated_sentence(passage: str, rng: random.Random) -> str:
    """A sentence of `passage` repeated 10-40 times where it stands."""
    parts = sentences(passage)
    k = rng.randrange(len(parts))
    return "".join(parts[:k] + [parts[k]] * rng.randint(10, 40) + parts[k + 1 :])


def duplicated_paragraphs(paragraphs: list[str], rng: random.Random) -> str:
    """2-4 of `paragraphs`, each repeated 3-10 times, one paragraph per block."""
    chosen = rng.sample(paragraphs, min(len(paragraphs), rng.randint(2, 4)))
    return "\n\n".join(p for p in chosen for _ in range(rng.randint(3, 10)))


def dominating_phrase(passage: str, rng: random.Random, han: bool = True) -> str:
    """`passage` with one of its phrases (2-4 Han characters, or one word) inserted after clauses
    and sentences until the phrase is about a third of the characters."""
    if han:
        runs = [run for run in re.findall(r"[\u4e00-\u9fff]{2,}", passage)]
        run = rng.choice(runs)
        size = min(len(run), rng.randint(2, 4))
        start = rng.randrange(len(run) - size + 1)
        phrase = run[start : start + size]
    else:
        phrase = rng.choice([w for w in passage.split() if w.isalpha() and len(w) > 3]) + " "
    clauses = [c for c in _CLAUSE.split(passage) if c]
    target = len(passage) // 2 // len(phrase)  # phrase chars about 1/3 of the result
    out = []
    per = max(1, -(-target // max(1, len(clauses))))
    for clause in clauses:
        out.append(clause + phrase * per)
    return "".join(out)


def line_list(passage: str, rng: random.Random) -> str:
    """20-60 lines of 2-10 characters cut from `passage`, punctuation removed (a menu)."""
    letters = _PUNCTUATION.sub("", passage)
    lines = []
    for _ in range(rng.randint(20, 60)):
        size = rng.randint(2, 10)
        start = rng.randrange(max(1, len(letters) - size))
        lines.append(letters[start : start + size])
    return "\n".join(lines)


def chinese_junk(clean: list[str], rng: random.Random, count: int) -> dict[str, list[str]]:
    """`count` documents of each kind above, built from the `clean` Chinese passages (the
    duplicated paragraphs from those over 200 characters on one line)."""
    paragraphs = [p for p in clean if len(p) > 200 and "\n" not in p]
    return {
        "repeated_sentence": [repeated_sentence(rng.choice(clean), rng) for _ in range(count)],
        "duplicated_paragraphs": [
            duplicated_paragraphs(rng.sample(paragraphs, 5), rng) for _ in range(count)
        ],
        "dominating_phrase": [dominating_phrase(rng.choice(clean), rng) for _ in range(count)],
        "line_list": [line_list(rng.choice(clean), rng) for _ in range(count)],
    }


def english_trips(paragraphs: list[str], rng: random.Random) -> dict[str, str]:
    """English documents (real `paragraphs` of prose, 5+ sentences each) altered to trip one of
    datatrove's rules each, by the rule's reason."""
    base = "\n\n".join(rng.sample(paragraphs, 4))
    words = base.split()
    lines = [line for p in paragraphs[:40] for line in sentences(p)][:60]
    bare = [_PUNCTUATION.sub(" ", line).strip() for line in lines]
    stop = ("the", "be", "to", "of", "and", "that", "have", "with")

    def sprinkle(make: Callable[[], str], every: int) -> str:
        return " ".join(w + (" " + make() if i % every == 0 else "") for i, w in enumerate(words))

    return {
        "dup_para_frac": "\n\n".join([paragraphs[0]] * 4 + paragraphs[1:3]),
        "dup_line_frac": "\n".join([lines[0]] * 12 + lines[1:10]),
        "top_2_gram": base + " " + "click here " * (len(words) // 3),
        "duplicated_5_n_grams": base + "\n" + " ".join(words[:40]) * 3,
        "gopher_short_doc": " ".join(words[:30]) + ".",
        "gopher_below_avg_threshold": sprinkle(lambda: " ".join(rng.choice("aIxyz") for _ in range(3)), 1),
        "gopher_too_many_hashes": sprinkle(lambda: "#" + rng.choice(words), 4),
        "gopher_too_many_ellipsis": sprinkle(lambda: "...", 4),
        "gopher_below_alpha_threshold": sprinkle(lambda: f"{rng.randint(0, 10**6)}", 1),
        "gopher_enough_stop_words": " ".join(w for w in words if w.lower() not in stop),
        "lorem_ipsum": base + "\n" + "Lorem ipsum dolor sit amet, consectetur adipiscing elit.",
        "curly_bracket": base + "\n" + "The function returns {value} to its caller.",
        "too_few_sentences": " ".join(sentences(base)[:3]) + "\n" + "\n".join(bare[:20]),
        "line_punct_ratio": " ".join(sentences(base)[:8]) + "\n" + "\n".join(bare[:40]),
        "short_line_ratio": "\n".join(line[:25] for line in lines),
    }
