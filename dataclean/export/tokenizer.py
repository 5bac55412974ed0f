"""The tokenizers every exporter encodes with: the built-in byte tokenizer, or a Hugging Face one.

`bytes`: ids 0-255 are a text's UTF-8 bytes, 256 is end-of-sample, 257 is padding; a batch is
encoded without a Python loop (an Arrow string array's data buffer already holds the bytes).
Otherwise `spec` is a `tokenizer.json` (path or URI) of the Hugging Face `tokenizers` library,
encoded without its special tokens (`add_special_tokens=False`: no BOS or template), so a sample's
tokens are exactly `encode(text).ids`; dataclean appends the end-of-sample id itself. Its
end-of-sample and padding tokens are named by the user or found among the usual names.
`encode_documents` gives each text's tokens followed by the end-of-sample id (Megatron's
end-of-document, `eod`), the unit both `dataclean pack` and `dataclean export megatron` write.
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from dataclean.errors import ConfigError
from dataclean.io.files import exists, open_input

BYTES = "bytes"
BYTE_END_OF_SAMPLE = 256
BYTE_PADDING = 257
# Looked up in this order when the user names no token (GPT-2/Llama 3/Qwen, SentencePiece, BERT).
END_OF_SAMPLE_NAMES = ("<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "[SEP]")
PADDING_NAMES = ("<|pad|>", "<pad>", "[PAD]", "<|padding|>")


@dataclass
class PackTokenizer:
    """Encodes a batch of texts into one flat token array and per-text offsets.

    `spec`: `bytes` or a tokenizer.json path/URI. `end_of_sample` / `padding`: token strings of a
    Hugging Face tokenizer (default: the first of the usual names in its vocabulary; padding falls
    back to the end-of-sample token, which is harmless: padding is known by the spans, and its
    labels are masked in training). The loaded tokenizer is not pickled: each worker loads it once.
    """

    spec: str
    end_of_sample: str | None = None
    padding: str | None = None
    end_of_sample_id: int = field(init=False)
    padding_id: int = field(init=False)
    vocab_size: int = field(init=False)
    digest: str = field(init=False)
    _json: str | None = field(default=None, init=False, repr=False)
    _loaded: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.spec == BYTES:
            if self.end_of_sample or self.padding:
                raise ConfigError("--eos-token/--pad-token: the bytes tokenizer has fixed ids 256 and 257")
            self.end_of_sample_id, self.padding_id, self.vocab_size = BYTE_END_OF_SAMPLE, BYTE_PADDING, 258
            self.digest = BYTES
            return
        if not exists(self.spec):
            raise ConfigError(f"--tokenizer: {self.spec} does not exist (a tokenizer.json, or 'bytes')")
        with open_input(self.spec) as source:
            self._json = source.read().decode("utf-8")
        self.digest = hashlib.sha256(self._json.encode()).hexdigest()[:16]
        tokenizer = self._tokenizer()
        self.vocab_size = int(tokenizer.get_vocab_size(with_added_tokens=True))
        self.end_of_sample_id = self._token_id(
            tokenizer, self.end_of_sample, END_OF_SAMPLE_NAMES, "--eos-token"
        )
        if self.padding is None and not any(tokenizer.token_to_id(n) is not None for n in PADDING_NAMES):
            self.padding_id = self.end_of_sample_id
        else:
            self.padding_id = self._token_id(tokenizer, self.padding, PADDING_NAMES, "--pad-token")

    def _token_id(self, tokenizer: Any, name: str | None, usual: tuple[str, ...], option: str) -> int:
        for candidate in (name,) if name else usual:
            found = tokenizer.token_to_id(candidate)
            if found is not None:
                return int(found)
        wanted = repr(name) if name else f"any of {', '.join(usual)}"
        raise ConfigError(f"{option}: {self.spec} has no token {wanted}; name one with {option}")

    def _tokenizer(self) -> Any:
        if self._loaded is None:
            try:
                from tokenizers import Tokenizer
            except ImportError as error:
                raise ConfigError(
                    "--tokenizer: a tokenizer.json needs the tokenizers package "
                    "(pip install 'dataclean[tokenizers]')"
                ) from error
            try:
                self._loaded = Tokenizer.from_str(self._json or "")
            except Exception as error:  # the library raises plain Exceptions for bad files
                raise ConfigError(f"--tokenizer: {self.spec} is not a tokenizer.json: {error}") from error
        return self._loaded

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_loaded": None}

    def describe(self) -> dict[str, Any]:
        """What pack.json records about the tokenizer."""
        return {
            "spec": self.spec,
            "sha256": self.digest,
            "vocab_size": self.vocab_size,
            "end_of_sample_id": self.end_of_sample_id,
            "padding_id": self.padding_id,
        }

    def encode(self, texts: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """Tokens of every text (int32, concatenated) and offsets (int64, len(texts) + 1)."""
        if self.spec == BYTES:
            return _utf8_tokens(texts)
        # One call for the batch: the library encodes it on its own thread pool (Rust, without
        # the GIL; TOKENIZERS_PARALLELISM=false or RAYON_NUM_THREADS=1 keep it to one core), and
        # `_fast` skips the character offsets nobody reads here.
        encodings = self._tokenizer().encode_batch_fast(texts.to_pylist(), add_special_tokens=False)
        offsets = np.zeros(len(encodings) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, encodings), dtype=np.int64, count=len(encodings)), out=offsets[1:])
        # each encoding's ids list is built once and read straight into one array (no per-row
        # array, no second list for the length: len(encoding) is its token count)
        ids = itertools.chain.from_iterable(e.ids for e in encodings)
        return np.fromiter(ids, dtype=np.int32, count=int(offsets[-1])), offsets


def _utf8_tokens(texts: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A string array's UTF-8 bytes as tokens: its data buffer, read through its offsets."""
    texts = texts.cast(pa.large_string())
    _, offset_buffer, data_buffer = texts.buffers()
    offsets = np.frombuffer(offset_buffer, dtype=np.int64)[texts.offset : texts.offset + len(texts) + 1]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    tokens = data[offsets[0] : offsets[-1]].astype(np.int32)
    return tokens, offsets - offsets[0]


def encode_documents(tokenizer: PackTokenizer, texts: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Every text's tokens followed by the end-of-sample id, concatenated (int32), and offsets
    (int64, len(texts) + 1): document k is `tokens[offsets[k]:offsets[k + 1]]`."""
    tokens, offsets = tokenizer.encode(texts)
    count = len(offsets) - 1
    ends = offsets[1:] + np.arange(1, count + 1)  # one past each text's end-of-sample
    with_end = np.empty(len(tokens) + count, dtype=np.int32)
    is_token = np.ones(len(with_end), dtype=bool)
    is_token[ends - 1] = False
    with_end[is_token] = tokens
    with_end[ends - 1] = tokenizer.end_of_sample_id
    return with_end, np.r_[0, ends].astype(np.int64)
