"""Build the example's corpus from the text dataclean ships: real English prose with bad samples
of several kinds injected, and a few corrupt records for one batch of the training run.

Clean samples are paragraphs of about 200-450 characters of the WikiText-2 articles in
`dataclean/data/sample/wiki.parquet` (detokenized; WikiText's `<unk>` shows as "unk"). Injected,
in random positions with ordinary-looking ids:
- `random_bytes`: random bytes decoded as text: as UTF-8 (mostly replacement characters), as
  Latin-1 (accented letters and symbols), or as UTF-16 (a scatter of CJK, Hangul and other
  characters, which script-based language detection takes for an Asian language);
- `base64`: a base64 blob, as leaked attachments look in web dumps;
- `wrong_language`: Chinese Wikipedia paragraphs (`dataclean/data/sample/zh.jsonl.gz`) in an
  English corpus;
- `gibberish`: pronounceable nonsense words, the kind of text a loose perplexity threshold keeps.
Shuffled words are not injected: a byte-level model trained for a minute hardly knows word order
(a measured run caught 0 of 15), so they are the perplexity stage's job, whose word-level KenLM
model sees them at once (README, "Perplexity").
Writes DIR/input/corpus.jsonl (id, text) and DIR/injected.json (id -> kind), the answer key that
the example scores the quarantine against; dataclean never sees it.

`spike_records` makes the data spike: binary records (control bytes, as a corrupt shard read
gives) that the training loop puts into one batch, bypassing cleaning, the way a loader bug or an
unfiltered shard does in real runs.
"""

from __future__ import annotations

import base64
import gzip
import json
import random
import re
from pathlib import Path

import pyarrow.parquet as pq

KINDS = {
    "random_bytes": 25,
    "base64": 12,
    "wrong_language": 25,
    "gibberish": 12,
}
SAMPLE = Path(__file__).resolve().parents[2] / "dataclean" / "data" / "sample"


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


def clean_samples() -> list[str]:
    """Paragraphs of the shipped WikiText-2 articles."""
    table = pq.read_table(SAMPLE / "wiki.parquet", columns=["text", "source"])
    samples = []
    columns = table.to_pydict()
    for text, source in zip(columns["text"], columns["source"], strict=True):
        if source != "wikitext2":
            continue
        for block in text.split("\n\n"):
            block = block.strip()
            if not block or block.startswith("=") or "<unk>" in block:
                continue
            samples += paragraphs(re.split(r"(?<=[.!?]) ", detokenize(block)), low=200, high=450)
    return samples


def chinese_paragraphs() -> list[str]:
    """The shipped Chinese Wikipedia paragraphs, cut to 250 characters."""
    with gzip.open(SAMPLE / "zh.jsonl.gz", "rt", encoding="utf-8") as handle:
        texts = [json.loads(line)["text"].strip() for line in handle if line.strip()]
    return [text[:250] for text in texts if len(text) >= 150]


def pseudo_word(rng: random.Random) -> str:
    consonants, vowels = "bcdfghjklmnprstvwz", "aeiou"
    return "".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(rng.randint(1, 4)))


def bad_sample(kind: str, rng: random.Random, english: list[str], chinese: list[str]) -> str:
    if kind == "random_bytes":
        blob = rng.randbytes(rng.randint(150, 250) * 2)
        encoding = rng.choice(["utf-8", "latin-1", "utf-16-le"])
        return blob.decode(encoding, "replace")
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


def spike_records(count: int = 3, seed: int = 1) -> list[tuple[str, str]]:
    """(id, text) of `count` corrupt binary records for one batch: control bytes, never seen in
    clean text (the clean stage strips them, which is why they are put into training directly)."""
    rng = random.Random(seed)
    alphabet = [chr(c) for c in range(0x20) if chr(c) not in "\t\n\r"]
    return [(f"corrupt-{n}", "".join(rng.choice(alphabet) for _ in range(300))) for n in range(count)]


def build(out: Path, heldout: int = 100, seed: int = 0) -> dict[str, str]:
    """Write out/input/corpus.jsonl, out/injected.json (id -> kind of the injected samples) and
    out/heldout.jsonl (clean paragraphs the model never trains on, to measure it)."""
    rng = random.Random(seed)
    english = clean_samples()
    rng.shuffle(english)
    chinese = chinese_paragraphs()
    train, held = english[heldout:], english[:heldout]
    rows: list[tuple[str, str | None]] = [(text, None) for text in train]
    for kind, count in KINDS.items():
        rows += [(bad_sample(kind, rng, train, chinese), kind) for _ in range(count)]
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
        for number, text in enumerate(held):
            handle.write(json.dumps({"id": f"heldout-{number:04d}", "text": text}) + "\n")
    return injected
