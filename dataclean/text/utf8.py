"""The UTF-8 bytes and offsets of an Arrow string array, for numba kernels, without a copy.

Kernels that walk text (language identification, the repetition check, clean's byte pass) read an
array's UTF-8 data buffer and its offsets directly: a `string` array's int32 offsets are widened
(one small array per batch), its data is not copied. Only an array with nulls is rewritten (nulls as empty
strings), since a null slot's bytes are not defined by Arrow.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from dataclean.jit import helper


@helper
def decode_code_point(data, i):  # type: ignore[no-untyped-def]
    """The code point starting at byte i of valid UTF-8 `data`, and its length in bytes."""
    byte = data[i]
    if byte < 0x80:
        return np.int64(byte), 1
    if byte < 0xE0:
        code, size = np.int64(byte & 0x1F), 2
    elif byte < 0xF0:
        code, size = np.int64(byte & 0x0F), 3
    else:
        code, size = np.int64(byte & 0x07), 4
    for k in range(1, size):
        code = (code << 6) | np.int64(data[i + k] & 0x3F)
    return code, size


def utf8_buffers(texts: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """The UTF-8 data buffer (uint8) and int64 offsets into it of a string array (nulls as
    empty strings): text i is `data[offsets[i]:offsets[i + 1]]`."""
    if isinstance(texts, pa.ChunkedArray):
        if texts.num_chunks == 1:
            texts = texts.chunk(0)
        else:
            texts = texts.combine_chunks() if texts.num_chunks else pa.array([], pa.string())
    if texts.null_count:
        texts = texts.fill_null("")
    if pa.types.is_string(texts.type):
        offset_type: type[np.signedinteger] = np.int32
    elif pa.types.is_large_string(texts.type):
        offset_type = np.int64
    else:
        texts = texts.cast(pa.large_string())
        offset_type = np.int64
    buffers = texts.buffers()
    count = len(texts)
    if buffers[1] is None:
        return np.zeros(1, np.uint8), np.zeros(count + 1, np.int64)
    offsets = np.frombuffer(buffers[1], offset_type)[texts.offset : texts.offset + count + 1]
    data = np.frombuffer(buffers[2], np.uint8) if buffers[2] is not None else np.zeros(1, np.uint8)
    return data, offsets.astype(np.int64)
