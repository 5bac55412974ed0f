"""The tokenizers `dataclean pack` encodes with: shared by every exporter, in
`dataclean.export.tokenizer` (this module keeps the names importable from here)."""

from dataclean.export.tokenizer import (
    BYTE_END_OF_SAMPLE,
    BYTE_PADDING,
    BYTES,
    END_OF_SAMPLE_NAMES,
    PADDING_NAMES,
    PackTokenizer,
)

__all__ = [
    "BYTES",
    "BYTE_END_OF_SAMPLE",
    "BYTE_PADDING",
    "END_OF_SAMPLE_NAMES",
    "PADDING_NAMES",
    "PackTokenizer",
]
