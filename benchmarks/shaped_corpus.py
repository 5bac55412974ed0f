"""A dedup scale corpus whose shape does not change with its size.

`bench_scale.build_corpus` draws every document from one pool of about 80,000 real sentences, and
its copies from the first 200,000 documents made. So the larger it is, the more its documents
share: at 10M documents each sentence is used about 300 times, 42% of the rows are duplicates and
one LSH component holds 5.4M rows (54%; 5,907 rows at 1M). A curve over it measures a task that
grows faster than the corpus (docs/scaling.md), not how the machinery scales with it. Here every
share is fixed, at every size:

- unique documents (79%): 1-4 sentences of 8-40 words drawn from a word bigram chain fitted on the
  reference English text (Gutenberg, WikiText-2), or, one in four, of 15-100 characters from a
  character bigram chain fitted on the Chinese (CMRC 2018, 红楼梦): words (characters) in their
  real frequencies and real pairs, while longer n-grams repeat about as often as in text of that
  size, not more as the corpus grows;
- exact copies (8%) and near copies (8%: one word, or character, replaced) of a unique document
  or a site page of the same shard (shards of `ROWS_PER_SHARD`), so clusters of copies have the
  same sizes at every corpus size;
- site pages (5%): sites of `SITE_PAGES` pages sharing a template of 60 words (or 120 characters)
  around 40 words (80 characters) of their own, a word 5-gram Jaccard of about 0.4 between two
  pages of a site: under the threshold, but one LSH component per site (the template case of
  `bench_dedup_template`), whose count grows with the corpus while its size does not.

Without the reference data (`--generated`) the chains are fitted on `corpus.generated_docs`.
Shards are built independently from (seed, shard), two processes at a time; benchmarks only.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from benchmarks import corpus as data

ROWS_PER_SHARD = 25_000
EXACT_SHARE, NEAR_SHARE, SITE_SHARE = 0.08, 0.08, 0.05
CHINESE_SHARE = 0.25
SITE_PAGES = 200
# (words per sentence, template, own words) for English; Chinese counts characters.
ENGLISH = ((8, 40), 60, 40)
CHINESE = ((15, 100), 120, 80)


@dataclass(frozen=True)
class Chain:
    """A bigram chain: token strings, and per token the tokens that follow it in the text (with
    repeats, so drawing uniformly among them draws by the pair's frequency)."""

    tokens: pa.Array
    starts: np.ndarray  # per token, where its followers begin in `followers`; and the end
    followers: np.ndarray
    separator: str

    @classmethod
    def fit(cls, tokens: list[str], separator: str) -> Chain:
        vocabulary, ids = np.unique(np.array(tokens, dtype=object), return_inverse=True)
        ids = ids.astype(np.int64)
        pairs = np.stack([ids[:-1], ids[1:]], axis=1)
        pairs = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
        starts = np.searchsorted(pairs[:, 0], np.arange(len(vocabulary) + 1))
        return cls(pa.array(vocabulary.tolist(), pa.string()), starts, pairs[:, 1], separator)

    def walk(self, rng: np.random.Generator, lengths: np.ndarray) -> pa.Array:
        """One text per length: a walk of that many tokens from a random token (a token with no
        follower restarts the walk at a random token), joined by the separator."""
        total = int(lengths.sum())
        out = np.empty(total, np.int64)
        offsets = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        longest = int(lengths.max(initial=0))
        current = self.followers[rng.integers(0, len(self.followers), len(lengths))]
        for step in range(longest):
            alive = np.flatnonzero(lengths > step)
            if len(alive) == 0:
                break
            out[offsets[alive] + step] = current[alive]
            begin, end = self.starts[current], self.starts[current + 1]
            count = end - begin
            pick = begin + (rng.random(len(current)) * np.maximum(count, 1)).astype(np.int64)
            restart = self.followers[rng.integers(0, len(self.followers), len(current))]
            current = np.where(count > 0, self.followers[np.minimum(pick, len(self.followers) - 1)], restart)
        words = self.tokens.take(pa.array(out))
        return pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), words), self.separator)


def _chains() -> tuple[Chain, Chain]:
    """(English word chain, Chinese character chain) from the reference data, or generated text."""
    if not data.have_shared():
        docs = data.generated_docs(4000)
        english = [w for d in docs if d.isascii() for w in d.split()]
        chinese = [c for d in docs if not d.isascii() for c in d]
        return Chain.fit(english, " "), Chain.fit(chinese, "")
    texts = [
        p.read_text(encoding="utf-8", errors="ignore") for p in sorted((data.SHARED / "en").glob("*/*.txt"))
    ]
    english = [w for text in texts for w in re.sub(r"\s+", " ", text).split(" ") if w]
    chinese_text = "".join(data.zh_docs())
    chinese = [c for c in chinese_text if not c.isspace()]
    return Chain.fit(english, " "), Chain.fit(chinese, "")


_CHAINS: tuple[Chain, Chain] | None = None


def _shard(folder: Path, shard: int, rows: int, seed: int, site_base: int) -> None:
    """Write shard `shard` of `rows` rows, its site pages numbered from `site_base`."""
    global _CHAINS
    if _CHAINS is None:
        _CHAINS = _chains()
    rng = np.random.default_rng([seed, shard])
    roll = rng.random(rows)
    chinese = rng.random(rows) < CHINESE_SHARE
    kind = np.select(
        [roll < EXACT_SHARE, roll < EXACT_SHARE + NEAR_SHARE, roll < EXACT_SHARE + NEAR_SHARE + SITE_SHARE],
        [1, 2, 3],
        0,
    )
    texts = np.empty(rows, dtype=object)
    for language, (chain, (sentence, template_size, own)) in enumerate(
        zip(_CHAINS, (ENGLISH, CHINESE), strict=True)
    ):
        mine = chinese == bool(language)
        # Copies' rows are drawn too and overwritten below (the corpora measured were drawn so).
        unique = np.flatnonzero(mine & (kind <= 2))
        draws = rng.integers(*sentence, (len(unique), 4), endpoint=True)
        lengths = (draws * (np.arange(4) < rng.integers(1, 5, len(unique))[:, None])).sum(axis=1)
        texts[unique] = chain.walk(rng, lengths).to_numpy(zero_copy_only=False)
        pages = np.flatnonzero(mine & (kind == 3))
        if len(pages):
            site = (site_base + np.arange(len(pages))) // SITE_PAGES
            sites, which = np.unique(site, return_inverse=True)
            templates = [
                _template(chain, np.random.default_rng([seed, 1 << 20, int(s), language]), template_size)
                for s in sites
            ]
            bodies = chain.walk(rng, np.full(len(pages), own, np.int64)).to_numpy(zero_copy_only=False)
            sep = chain.separator
            texts[pages] = [
                sep.join((templates[w][0], body, templates[w][1]))
                for w, body in zip(which, bodies, strict=True)
            ]
    originals = np.flatnonzero((kind == 0) | (kind == 3))
    for copy in np.flatnonzero((kind == 1) | (kind == 2)):
        text = texts[originals[rng.integers(0, len(originals))]]
        if kind[copy] == 2:
            text = _near_copy(text, rng)
        texts[copy] = text
    ids = [f"s{shard:05d}-{row:06d}" for row in range(rows)]
    pq.write_table(
        pa.table({"id": ids, "text": pa.array(texts.tolist(), pa.string())}),
        folder / f"part-{shard:05d}.parquet",
    )


def _template(chain: Chain, rng: np.random.Generator, size: int) -> tuple[str, str]:
    """A site's template: its text before and after a page's own words (3/5 before)."""
    head = chain.walk(rng, np.array([size * 3 // 5, size - size * 3 // 5])).to_pylist()
    return head[0], head[1]


def _near_copy(text: str, rng: np.random.Generator) -> str:
    """`text` with one word (or, without spaces, one character) replaced."""
    words = text.split(" ")
    if len(words) > 6:
        words[int(rng.integers(0, len(words)))] = "changed"
        return " ".join(words)
    at = int(rng.integers(0, len(text)))
    return text[:at] + "变" + text[at + 1 :]


def build(folder: Path, docs: int, seed: int = 5) -> None:
    """Write `docs` documents in shards of `ROWS_PER_SHARD` rows into `folder` (cached: a DONE
    marker with the size)."""
    marker = folder / "DONE"
    expected = {"docs": docs, "rows_per_shard": ROWS_PER_SHARD, "seed": seed}
    if marker.exists() and json.loads(marker.read_text()) == expected:
        return
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.parquet"):
        old.unlink()
    shards = max(1, -(-docs // ROWS_PER_SHARD))
    rows = [min(ROWS_PER_SHARD, docs - shard * ROWS_PER_SHARD) for shard in range(shards)]
    # A site's pages continue in the next shard: each shard starts its site pages where the
    # expected count before it ends (the same numbering whatever the process order).
    bases = [int(sum(rows[:shard]) * SITE_SHARE) for shard in range(shards)]
    with ProcessPoolExecutor(2) as pool:
        list(pool.map(_shard, [folder] * shards, range(shards), rows, [seed] * shards, bases))
    marker.write_text(json.dumps(expected))
