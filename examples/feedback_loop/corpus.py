"""Build the example's corpus: real English prose with bad samples of several kinds injected.

Clean samples are paragraphs of about 300-600 characters from Project Gutenberg novels and
WikiText-2 articles (detokenized). Injected, in random positions with ordinary-looking ids:
- `random_bytes`: random bytes decoded as text: as UTF-8 (mostly replacement characters), as
  Latin-1 (accented letters and symbols), or as UTF-16 (a scatter of CJK, Hangul and other
  characters, which script-based language detection takes for an Asian language);
- `shuffled_words`: a real paragraph with its words in random order;
- `base64`: a base64 blob, as leaked attachments look in web dumps;
- `wrong_language`: Chinese Wikipedia paragraphs in an English corpus;
- `gibberish`: pronounceable nonsense words, the kind of text a loose perplexity threshold keeps.
Writes DIR/input/corpus.jsonl (id, text) and DIR/injected.json (id -> kind), the answer key that
the example scores the quarantine against; dataclean never sees it.
"""

from __future__ import annotations

import base64
import json
import random
import re
from pathlib import Path

KINDS = {
    "random_bytes": 60,
    "shuffled_words": 40,
    "base64": 30,
    "wrong_language": 60,
    "gibberish": 30,
}
NOVELS = [
    "austen-emma.txt",
    "austen-persuasion.txt",
    "austen-sense.txt",
    "chesterton-ball.txt",
    "chesterton-brown.txt",
    "chesterton-thursday.txt",
    "edgeworth-parents.txt",
    "melville-moby_dick.txt",
]


def detokenize(line: str) -> str:
    """Undo the corpora's tokenization (" ," -> ",", " @-@ " -> "-", ...)."""
    line = line.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".")
    line = line.replace("`` ", '"').replace(" ''", '"').replace("''", '"').replace("` ", "'")
    line = re.sub(r" ([,.;:!?)\]'])", r"\1", line)
    line = re.sub(r"([(\[]) ", r"\1", line)
    line = re.sub(r" ?(n't|' ?s|'re|'ve|'ll|' ?d|'m)\b", lambda m: m.group(1).replace(" ", ""), line)
    return re.sub(r"\s+", " ", line).strip()


def paragraphs(sentences: list[str], low: int = 300, high: int = 600) -> list[str]:
    """Join consecutive sentences into paragraphs of `low` to `high` characters."""
    out, current = [], ""
    for sentence in sentences:
        if len(sentence) > high:
            continue
        candidate = f"{current} {sentence}".strip()
        if len(candidate) > high:
            if len(current) >= low:
                out.append(current)
            current = sentence
        else:
            current = candidate
    return out


def _boilerplate(sentence: str) -> bool:
    """Project Gutenberg's licence text, which some of the books still carry: not prose."""
    lowered = sentence.lower()
    return "gutenberg" in lowered or "ebook" in lowered or "e-text" in lowered


def clean_samples(data: Path) -> list[str]:
    samples = []
    for name in NOVELS:
        lines = (data / "en" / "gutenberg" / name).read_text(encoding="utf-8").splitlines()
        sentences = [detokenize(line) for line in lines if len(line.split()) >= 5]
        samples += paragraphs([s for s in sentences if not s.isupper() and not _boilerplate(s)])
    for name in ("valid.txt", "test.txt"):
        text = (data / "en" / "wikitext2" / name).read_text(encoding="utf-8")
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("=") or "<unk>" in line:
                continue
            sentences = re.split(r"(?<=[.!?]) ", detokenize(line))
            samples += paragraphs(sentences)
    return samples


def chinese_paragraphs(data: Path) -> list[str]:
    text = (data / "zh" / "cmrc2018" / "cmrc2018_contexts_dedup.txt").read_text(encoding="utf-8")
    return [line.strip()[:250] for line in text.splitlines() if len(line.strip()) >= 150]


def pseudo_word(rng: random.Random) -> str:
    consonants, vowels = "bcdfghjklmnprstvwz", "aeiou"
    return "".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(rng.randint(1, 4)))


def bad_sample(kind: str, rng: random.Random, english: list[str], chinese: list[str]) -> str:
    if kind == "random_bytes":
        blob = rng.randbytes(rng.randint(150, 250) * 2)
        encoding = rng.choice(["utf-8", "latin-1", "utf-16-le"])
        return blob.decode(encoding, "replace")
    if kind == "shuffled_words":
        words = rng.choice(english).split()
        rng.shuffle(words)
        return " ".join(words)
    if kind == "base64":
        encoded = base64.b64encode(rng.randbytes(rng.randint(250, 400))).decode()
        return "\n".join(encoded[i : i + 76] for i in range(0, len(encoded), 76))
    if kind == "wrong_language":
        return rng.choice(chinese)
    if kind == "gibberish":
        words = [pseudo_word(rng) for _ in range(rng.randint(60, 100))]
        sentences = [" ".join(words[i : i + 12]).capitalize() + "." for i in range(0, len(words), 12)]
        return " ".join(sentences)
    raise ValueError(kind)


def build(data: Path, out: Path, clean: int = 3000, heldout: int = 200, seed: int = 0) -> dict[str, str]:
    """Write out/input/corpus.jsonl, out/injected.json (id -> kind of the injected samples) and
    out/heldout.jsonl (clean paragraphs the model never trains on, to measure it)."""
    rng = random.Random(seed)
    english = clean_samples(data)
    rng.shuffle(english)
    chinese = chinese_paragraphs(data)
    rows: list[tuple[str, str | None]] = [(text, None) for text in english[:clean]]
    for kind, count in KINDS.items():
        rows += [(bad_sample(kind, rng, english[clean + heldout :], chinese), kind) for _ in range(count)]
    rng.shuffle(rows)
    (out / "input").mkdir(parents=True, exist_ok=True)
    injected = {}
    with open(out / "input" / "corpus.jsonl", "w", encoding="utf-8") as handle:
        for number, (text, kind) in enumerate(rows):
            sample_id = f"doc-{number:05d}"
            handle.write(json.dumps({"id": sample_id, "text": text}, ensure_ascii=False) + "\n")
            if kind:
                injected[sample_id] = kind
    (out / "injected.json").write_text(json.dumps(injected, indent=1))
    with open(out / "heldout.jsonl", "w", encoding="utf-8") as handle:
        for number, text in enumerate(english[clean : clean + heldout]):
            handle.write(json.dumps({"id": f"heldout-{number:04d}", "text": text}) + "\n")
    return injected
