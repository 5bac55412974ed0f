"""ANSI/VT terminal escape sequences (ECMA-48), found and removed as whole sequences.

Text captured from a terminal or a log keeps its colour codes: removing only the ESC character
(a C0 control) leaves `[0m` or `[1;31m` in the text. `strip_escape_sequences` removes each
sequence whole, in the forms ECMA-48 (5th edition, 1991, sections 5.3-5.6 and 8.3.89) defines
and terminals (xterm, VT100) use:
- CSI, control sequences: ESC `[`, parameter bytes 0x30-0x3F, intermediate bytes 0x20-0x2F, one
  final byte 0x40-0x7E (`ESC[0m`, `ESC[1;31m`, `ESC[2J`, `ESC[?25l`);
- control strings: OSC (ESC `]`, window titles, OSC 8 hyperlinks), DCS (ESC `P`), SOS (ESC `X`),
  PM (ESC `^`) and APC (ESC `_`), up to the string terminator ST (ESC `\\`) or BEL (xterm's
  terminator for OSC), on one line and at most `_MAX_STRING` characters; an unterminated string
  loses only its introducer;
- nF escape sequences (ESC, intermediate bytes 0x20-0x2F, a final byte 0x30-0x7E: `ESC(B`
  designates a character set) and the two-character Fp, Fe and Fs sequences (ESC and one byte
  0x30-0x7E: `ESC7`, `ESCM`, `ESCc`).
An ESC that starts none of these stays for the control-character removal. The 8-bit C1 forms
(U+009B for CSI) are not read as sequences: in text decoded from UTF-8 a C1 character is far more
often Windows-1252 punctuation read as Latin-1, which the mojibake repair turns back into `›`.
The tests check the result against pyte's VT emulator (what a terminal would display).
"""

from __future__ import annotations

import re

_MAX_STRING = 4096
ESCAPE_SEQUENCE = re.compile(
    "\x1b(?:"
    r"\[[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]"  # CSI
    rf"|[\]PX^_][^\n\x1b\x07]{{0,{_MAX_STRING}}}(?:\x07|\x1b\\)"  # OSC, DCS, SOS, PM, APC strings
    r"|[\]PX^_]"  # an unterminated string's introducer
    r"|[\x20-\x2f]+[\x30-\x7e]"  # nF
    r"|[\x30-\x7e]"  # Fp, Fe, Fs
    ")"
)


def strip_escape_sequences(text: str) -> tuple[str, int, int]:
    """(`text` without its escape sequences, sequences removed, characters removed)."""
    if "\x1b" not in text:
        return text, 0, 0
    stripped, count = ESCAPE_SEQUENCE.subn("", text)
    return stripped, count, len(text) - len(stripped)
