"""The clean stage removes ANSI/VT escape sequences whole, counts them, and agrees with pyte's VT
emulator (what a terminal displays) on real lines with sequences put in."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from dataclean import columns as C
from dataclean.executors.local import LocalExecutor
from dataclean.run import run_pipeline
from dataclean.stages.clean import CleanText, clean_text
from dataclean.text.escapes import strip_escape_sequences
from tests.conftest import FIXTURE_ROOT, SAMPLE, read_rows, write_jsonl

FIXTURES = FIXTURE_ROOT / "clean"
# Sequences a terminal program writes: colours, cursor moves, erasing, private modes, window
# titles (BEL and ST terminated), hyperlinks, charset designation, keypad modes, save/restore.
SEQUENCES = [
    "\x1b[0m", "\x1b[1;31m", "\x1b[38;5;208m", "\x1b[48;2;10;20;30m", "\x1b[2J", "\x1b[K",
    "\x1b[10;5H", "\x1b[3A", "\x1b[?25l", "\x1b[?1049h", "\x1b]0;title\x07",
    "\x1b]2;build log\x1b\\", "\x1b]8;;https://example.com/a\x1b\\", "\x1b]8;;\x1b\\", "\x1b(B",
    "\x1b)0", "\x1b=", "\x1b>", "\x1b7", "\x1b8", "\x1bM", "\x1bc",
]  # fmt: skip


class _Drawn:
    """A pyte listener that keeps what would be drawn (and line feeds), ignoring every control."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def draw(self, data: str) -> None:
        self.parts.append(data)

    def linefeed(self) -> None:
        self.parts.append("\n")

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def _displayed(text: str) -> str:
    pyte = pytest.importorskip("pyte")
    listener = _Drawn()
    stream = pyte.Stream(listener)
    stream.feed(text)
    return "".join(listener.parts)


def _lines() -> list[str]:
    rows = (FIXTURES / "multilingual_lines.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(row)["text"] for row in rows]


def test_agrees_with_pyte_on_real_lines_with_sequences() -> None:
    """Every sequence, put at random places in real multilingual lines: the text left is what
    pyte, a VT100/xterm emulator, draws; and the count is the number put in."""
    rng = random.Random(5)
    lines = _lines()
    for index, line in enumerate(lines):
        words = line.split(" ")
        chosen = [SEQUENCES[(index + k) % len(SEQUENCES)] for k in range(3)]
        for sequence in chosen:
            words.insert(rng.randrange(len(words) + 1), sequence)
        dirty = " ".join(words) + "\n" + line
        stripped, count, removed = strip_escape_sequences(dirty)
        assert stripped == _displayed(dirty), dirty
        assert count == 3 and removed == sum(map(len, chosen))


@pytest.mark.parametrize(
    ("dirty", "clean"),
    [
        ("\x07\x1b[0mActualit\u00e9s", "Actualit\u00e9s"),  # the bundled sample's rows
        ("\x1b[1;32mOK\x1b[0m done", "OK done"),
        # DECSTR: CSI with an intermediate byte (ECMA-48 5.4), which pyte's parser does not read.
        ("soft\x1b[!p reset", "soft reset"),
        ("\x1b]8;;https://x.org\x1b\\link\x1b]8;;\x1b\\ text", "link text"),
        ("title\x1b]0;unterminated", "title0;unterminated"),  # only the introducer goes
        ("a\x1b", "a"),  # a lone ESC is a control character, removed
        ("\x1b[", ""),
    ],
)
def test_clean_text_removes_whole_sequences(dirty: str, clean: str) -> None:
    assert clean_text(dirty) == clean


def test_stage_counts_sequences_and_keeps_no_remnant() -> None:
    texts = ["\x1b[31mred\x1b[0m and plain", "no escape here", "\x1b]2;t\x07x"]
    out = CleanText()(pa.table({C.ID: ["a", "b", "c"], C.TEXT: texts}))
    assert out.column(C.TEXT).to_pylist() == ["red and plain", "no escape here", "x"]
    assert out.column(C.COUNT_PREFIX + "escape_sequences").to_pylist() == [2, 0, 1]
    assert out.column(C.REMOVED_CHARS).to_pylist() == [9, 0, 6]


def test_run_stats_count_sequences_and_undecodable_bytes(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    write_jsonl(source, [{"id": "a", "text": "\x1b[1mbold\x1b[0m text"}, {"id": "b", "text": "plain"}])
    with source.open("ab") as handle:  # a row with two bytes that are not UTF-8
        handle.write(b'{"id": "c", "text": "caf\xff\xfe au lait"}\n')
    stats = run_pipeline([str(source)], str(tmp_path / "out"), [CleanText()], LocalExecutor())
    clean = next(stage for stage in stats["stages"] if stage["stage"] == "clean")
    assert clean["counts"] == {"escape_sequences": 2, "wiki_conversion_markup": 0}
    assert stats["totals"]["undecodable_bytes"] == 2
    kept = read_rows(tmp_path / "out" / "data")
    assert not any(name.startswith(C.COUNT_PREFIX) for name in kept[0])
    assert sorted(row[C.TEXT] for row in kept) == ["bold text", "caf au lait", "plain"]


def test_bundled_sample_keeps_no_escape_remnant(tmp_path: Path) -> None:
    """14 of the sample's web pages start with BEL ESC [0m: no kept row starts with what is left
    of a sequence, and the count says how many went."""
    stats = run_pipeline([str(SAMPLE)], str(tmp_path / "out"), [CleanText()], LocalExecutor())
    kept = read_rows(tmp_path / "out" / "data")
    assert not [row[C.ID] for row in kept if row[C.TEXT].startswith(("[0m", "\x1b")) or "\x1b" in row[C.TEXT]]
    clean = next(stage for stage in stats["stages"] if stage["stage"] == "clean")
    assert clean["counts"]["escape_sequences"] >= 14
