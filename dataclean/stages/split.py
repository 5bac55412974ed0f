"""Split documents over a budget into samples cut on paragraph and sentence boundaries.

Training code cuts samples at a fixed length; a cut inside a sentence makes the model predict noise
there (a known cause of loss spikes). This stage turns every document over the budget into the
fewest chunks that fit, cut at the strongest boundary near an even share: paragraph, then
sentence, then line; a sentence alone over the budget at weak punctuation, then whitespace, then a
character boundary (never inside a character or surrogate pair, nor a grapheme cluster unless the
cluster alone is over the budget). Rules:
`dataclean.text.sentences` (hand-written, with why no library served) and
`dataclean.text.chunking` (packing, balancing, overlap, token budgets).

Chunk rows: `id = "{parent_id}#{k}"` (k from 0), `parent_id` = the document's id, the chunk's text,
every other column copied. Whitespace after a cut stays at the end of the chunk before it, so
joining a document's chunks in k order gives back its text exactly (with `overlap_sentences`, take
each chunk from where the previous one ended). Documents within budget pass through unchanged,
with `parent_id` = `id` (or the parent_id they already had).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean import columns as C
from dataclean.errors import ConfigError
from dataclean.stage import Stage
from dataclean.text import chunking, sentences
from dataclean.text.chunking import Tokenizer


def split_sentences(text: str, lang: str | None = None) -> list[str]:
    """The sentences (and lines, paragraphs) of `text`; `"".join(result) == text`.

    Rules are chosen per boundary by script, so mixed Chinese/English needs no `lang`; it is
    accepted for callers that know it and reserved for language-specific abbreviation lists
    (English is the only one so far, applied to all Latin-script text).
    """
    return sentences.split_sentences(text)


def chunk_text(
    text: str,
    max_chars: int | None = None,
    max_tokens: int | None = None,
    tokenizer: Tokenizer | None = None,
    overlap_sentences: int = 0,
    balance: float = chunking.DEFAULT_BALANCE,
) -> list[str]:
    """`text` cut into chunks within `max_chars` characters and/or `max_tokens` tokens.

    `tokenizer` is anything with `encode(text) -> ids` (needed for `max_tokens`). Without overlap
    `"".join(chunks) == text`; a text within budget comes back as `[text]`.
    """
    return chunking.chunk_text(text, max_chars, max_tokens, tokenizer, overlap_sentences, balance)


@dataclass
class SplitLongDocuments(Stage):
    """Replace each document over the budget by its chunks (see the module docstring).

    `max_chars` (default 2000): code points per sample. 2000 Chinese characters are roughly
    1,200-2,000 tokens with tokenizers built for Chinese (Qwen, ChatGLM, Baichuan: about 0.6-1
    token per character), so a chunk fits a 2048-token context; 2000 English characters are ~500
    tokens, a sample the trainer packs with others. Small samples also let perplexity filtering
    and quarantine drop a bad passage without its whole book. Set `max_tokens` + `tokenizer` (a
    spec for `chunking.load_tokenizer`) for an exact token budget; both budgets apply when both
    are set (`max_chars=None` for tokens only). `overlap_sentences`: repeat up to N sentences of
    a chunk at the start of the next. `balance`: each cut goes to the strongest boundary within
    +-balance x (average chunk size) of an even share (0 = evenest, 1 = strongest boundary).
    """

    name: ClassVar[str] = "split"
    adds_rows: ClassVar[bool] = True  # a long document becomes several chunks
    # Cuts rows into chunks: new `id`s, `parent_id` the document's (the reader's columns), no new column.
    max_chars: int | None = 2000
    max_tokens: int | None = None
    tokenizer: str | None = None
    overlap_sentences: int = 0
    balance: float = chunking.DEFAULT_BALANCE
    _encoder: Tokenizer | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_chars is None and self.max_tokens is None:
            raise ConfigError("split.max_chars: give max_chars, max_tokens or both")
        if self.max_chars is not None and self.max_chars < 1:
            raise ConfigError(f"split.max_chars: must be at least 1, got {self.max_chars}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ConfigError(f"split.max_tokens: must be at least 1, got {self.max_tokens}")
        if self.max_tokens is not None and not self.tokenizer:
            raise ConfigError("split.tokenizer: max_tokens needs one (e.g. sentencepiece:PATH)")
        if self.overlap_sentences < 0:
            overlap = self.overlap_sentences
            raise ConfigError(f"split.overlap_sentences: must be at least 0, got {overlap}")
        if not 0.0 <= self.balance <= 1.0:
            raise ConfigError(f"split.balance: must be within [0, 1], got {self.balance}")

    def setup(self) -> None:
        if self.max_tokens is not None and self.tokenizer and self._encoder is None:
            try:
                self._encoder = chunking.load_tokenizer(self.tokenizer)
            except (OSError, ValueError, ImportError, RuntimeError) as error:
                message = f"split.tokenizer: cannot load {self.tokenizer!r}: {error}"
                raise ConfigError(message) from error

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_encoder"] = None  # reloaded by setup() in each worker
        return state

    def _maybe_over(self, texts: pa.ChunkedArray | pa.Array) -> np.ndarray:
        """Rows that might be over budget: over max_chars, or with more UTF-8 bytes than tokens."""
        masks = []
        if self.max_chars is not None:
            masks.append(pc.greater(pc.utf8_length(texts), self.max_chars))
        if self.max_tokens is not None and self._encoder is not None:
            # A token covers at least one UTF-8 byte, plus the special tokens encode adds once:
            # a text with few enough bytes fits without being encoded.
            room = self.max_tokens - len(self._encoder.encode(""))
            masks.append(pc.greater(pc.binary_length(texts), room))
        mask = masks[0] if len(masks) == 1 else pc.or_(masks[0], masks[1])
        return np.asarray(mask.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)

    def __call__(self, table: pa.Table) -> pa.Table:
        self.setup()
        texts = table.column(C.TEXT)
        ids = table.column(C.ID)
        rows = np.flatnonzero(self._maybe_over(texts))
        counts = np.ones(table.num_rows, dtype=np.int64)
        chunk_texts: list[str] = []
        chunk_ids: list[str] = []
        for row, text, parent in zip(
            rows.tolist(), texts.take(rows).to_pylist(), ids.take(rows).to_pylist(), strict=True
        ):
            pieces = self.chunk(text)
            if len(pieces) == 1:
                continue
            if parent is None:
                raise ValueError(f"split: row {row} is over budget and has no {C.ID}")
            counts[row] = len(pieces)
            chunk_texts.extend(pieces)
            chunk_ids.extend(f"{parent}#{k}" for k in range(len(pieces)))
        return self._expand(table, counts, chunk_texts, chunk_ids)

    def chunk(self, text: str) -> list[str]:
        """The chunks of one document with this stage's parameters."""
        return chunking.chunk_text(
            text,
            self.max_chars,
            self.max_tokens,
            self._encoder,
            self.overlap_sentences,
            self.balance,
        )

    @staticmethod
    def _expand(
        table: pa.Table, counts: np.ndarray, chunk_texts: list[str], chunk_ids: list[str]
    ) -> pa.Table:
        """Each row repeated counts[row] times; split rows get their chunks' text and id."""
        ids = table.column(C.ID)
        split = np.zeros(table.num_rows, dtype=bool)
        out, parent_ids = table, ids
        if chunk_ids:
            n = table.num_rows
            parent_rows = pa.array(np.repeat(np.arange(n, dtype=np.int64), counts))
            split = np.repeat(counts > 1, counts)
            # Index into [original values..., chunk values...], chunk values in output order.
            source = np.repeat(np.arange(n, dtype=np.int64), counts)
            source[split] = n + np.arange(len(chunk_ids), dtype=np.int64)
            index = pa.array(source)
            # Take every column but the text: repeating a long text per chunk would copy it k times.
            position = table.schema.get_field_index(C.TEXT)
            texts = table.column(position)
            out = table.remove_column(position).take(parent_rows)
            new_texts = pa.chunked_array([*texts.chunks, pa.array(chunk_texts, texts.type)])
            out = out.add_column(position, table.schema.field(position), new_texts.take(index))
            new_ids = pa.chunked_array([*ids.chunks, pa.array(chunk_ids, ids.type)]).take(index)
            out = out.set_column(out.schema.get_field_index(C.ID), C.ID, new_ids)
            parent_ids = ids.take(parent_rows)
        parent_ids = parent_ids.cast(pa.string())
        position = out.schema.get_field_index(C.PARENT_ID)
        if position < 0:
            return out.append_column(C.PARENT_ID, parent_ids)
        existing = out.column(position).cast(pa.string())
        parent = pc.if_else(pa.array(split), parent_ids, pc.coalesce(existing, parent_ids))
        return out.set_column(position, C.PARENT_ID, parent)
