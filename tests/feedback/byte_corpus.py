"""Real text as fixed-length byte samples for tiny byte-level training runs, and real corruptions.

Sources (tests/fixtures, a few hundred KB of real text): English prose (Jane Austen's Emma,
Project Gutenberg), English web pages (Common Crawl pages datatrove keeps), Chinese Wikipedia
(CMRC 2018) and a Chinese novel (红楼梦). A sample is a run of `LENGTH + 1` bytes of one source's
UTF-8 text, cut from a random place (a byte model reads bytes; a cut may split a character, as a
packed sequence does). Chinese is harder per byte for a byte-level model than English (three bytes
a character), which is what the kinds tests need: a language that is harder is not a bad kind.

The corruptions are what a crawl really delivers: mojibake (UTF-8 read as cp1252), control
characters sprayed through the text, random bytes, a repeated junk run, and (`spam_text`) a
coupon-code dump whose codes and tracking links are random characters.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
LENGTH = 64  # bytes a sample predicts (it holds LENGTH + 1)
VOCAB = 256


def _lines(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def source_texts() -> dict[str, tuple[str, str]]:
    """Source name -> (language, all its text joined)."""
    paragraphs = _lines(FIXTURES / "feedback" / "paragraphs.jsonl")
    pages = [r for r in _lines(FIXTURES / "quality" / "cc_pages.jsonl") if r.get("datatrove") is None]
    chinese = _lines(FIXTURES / "quality" / "zh_clean.jsonl")
    return {
        "gutenberg.org": ("en", "\n".join(r["text"] for r in paragraphs if r["id"].startswith("en"))),
        "web.example": ("en", "\n".join(r["text"] for r in pages)),
        "zh.wikipedia.org": ("zh", "\n".join(r["text"] for r in chinese if r["source"] == "cmrc2018")),
        "hongloumeng": ("zh", "\n".join(r["text"] for r in chinese if r["source"] == "hongloumeng")),
    }


def spam_text(rng: np.random.Generator, size: int = 20_000) -> str:
    """A coupon-code dump page: lines of random codes and tracking links between a few words (the
    kind of page a spam site serves by the thousand; its codes are noise a model never learns)."""
    alphabet = np.array(list("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghjkmnpqrstuvwxyz23456789"))
    lines = []
    while sum(len(line) + 1 for line in lines) < size:
        codes = " ".join("".join(rng.choice(alphabet, 7)) for _ in range(3))
        track = "".join(rng.choice(alphabet, 18))
        off = int(rng.integers(10, 90))
        lines.append(f"{codes} -{off}% deals-codes.example/r?t={track}")
    return "\n".join(lines)


def windows(text: str, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` samples of LENGTH + 1 bytes cut from random places of `text` (count x LENGTH + 1)."""
    data = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    starts = rng.integers(0, len(data) - LENGTH - 1, count)
    return np.stack([data[s : s + LENGTH + 1] for s in starts]).astype(np.int64)


def corrupt(kind: str, row: np.ndarray, rng: np.random.Generator, chinese: str = "") -> np.ndarray:
    """A clean sample (bytes) made corrupt the way `kind` says; `mojibake` garbles a piece of
    `chinese` (ASCII text survives a wrong decoding unchanged, so it needs non-ASCII text)."""
    text = bytes(row.astype(np.uint8)).decode("utf-8", errors="ignore")
    if kind == "random":
        return rng.integers(0, VOCAB, LENGTH + 1)
    if kind == "mojibake":  # UTF-8 bytes read as cp1252 and written back as UTF-8
        start = int(rng.integers(0, max(len(chinese) - 60, 1)))
        broken = chinese[start : start + 60].encode("utf-8").decode("cp1252", errors="replace")
    elif kind == "control":
        codes = [chr(int(c)) for c in rng.integers(1, 32, len(text))]
        broken = "".join(c + k for c, k in zip(text, codes, strict=True))
    elif kind == "junk":
        broken = str(rng.choice(["=-=-", "�", "\\x00", "&nbsp;", "%20"])) * 40
    else:
        raise ValueError(f"unknown corruption {kind!r}")
    data = np.frombuffer(broken.encode("utf-8"), dtype=np.uint8)
    return np.resize(data, LENGTH + 1).astype(np.int64)


CORRUPTIONS = ("mojibake", "control", "random", "junk")


def planted_stream(
    plan: dict[int, int], batch: int, seed: int, clean: int = 4000
) -> tuple[list[str], np.ndarray, dict[str, str]]:
    """Ids, byte rows and texts in the order an unshuffled sampler draws them: clean samples of
    the four sources in random order, and at each planted step `plan[step]` corrupt samples at
    random slots of its batch (`junk-{step}-{slot}`), the corruptions taken in turn."""
    rng = np.random.default_rng(seed)
    sources = source_texts()
    names = list(sources)
    picks = rng.integers(0, len(names), clean)
    rows = [windows(sources[names[k]][1], 1, rng)[0] for k in picks]
    ids = [f"{names[k]}-{n:04d}" for n, k in enumerate(picks)]
    chinese = sources["zh.wikipedia.org"][1]
    for step in sorted(plan):
        slots = sorted(int(s) for s in rng.choice(batch, plan[step], replace=False))
        for k, slot in enumerate(slots):
            position = step * batch + slot
            ids.insert(position, f"junk-{step}-{slot}")
            rows.insert(position, corrupt(CORRUPTIONS[k % len(CORRUPTIONS)], rows[position], rng, chinese))
    texts = {
        i: bytes(r.astype(np.uint8)).decode("utf-8", errors="replace") for i, r in zip(ids, rows, strict=True)
    }
    return ids, np.stack(rows), texts


def text_samples(text: str, count: int, rng: np.random.Generator) -> list[str]:
    """`count` pieces of `text` cut at random characters, each just long enough for LENGTH + 1
    bytes of UTF-8 (a whole-character sample a corpus row can hold)."""
    pieces = []
    for start in rng.integers(0, len(text) - 4 * LENGTH, count):
        end = int(start) + (LENGTH + 1) // 3
        while len(text[start:end].encode("utf-8")) < LENGTH + 1:
            end += 1
        pieces.append(text[start:end])
    return pieces


def as_bytes(texts: list[str]) -> np.ndarray:
    """The first LENGTH + 1 bytes of each text's UTF-8 (count x LENGTH + 1)."""
    return np.stack([np.frombuffer(t.encode("utf-8")[: LENGTH + 1], dtype=np.uint8) for t in texts]).astype(
        np.int64
    )
