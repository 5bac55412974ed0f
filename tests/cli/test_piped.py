"""Piped output as one log (dataclean.cli.piped) and the display's group lines printed once."""

from __future__ import annotations

import io
import threading

from rich.console import Console

from dataclean.cli.piped import StampedStream, stamp_message
from dataclean.cli.progress import RunDisplay
from tests.conftest import PROGRESS_LINE

RAYLET = "\x1b[33m(raylet)\x1b[0m Task _call_item failed. There are 3 retries remaining"


def test_a_message_is_stamped_without_colour_and_its_lines_stay_together() -> None:
    assert stamp_message(RAYLET, started=100.0, now=112.34) == (
        "[ 12.3s] (raylet) Task _call_item failed. There are 3 retries remaining\n"
    )
    dead = "(raylet) The node has been marked dead because\nthe detector has missed too many heartbeats\n\n"
    assert stamp_message(dead, started=0.0, now=5.0) == (
        "[  5.0s] (raylet) The node has been marked dead because\n"
        "[  5.0s]   the detector has missed too many heartbeats\n"
    )
    # The display's own lines keep their stamp; a blank message is no line.
    assert stamp_message("[  1.5s] clean..dedup", started=0.0, now=9.0) == "[  1.5s] clean..dedup\n"
    assert stamp_message("\x1b[0m  \n", started=0.0) == ""


def test_print_and_logging_writes_become_whole_stamped_messages_per_thread() -> None:
    target = io.StringIO()
    stream = StampedStream(target, started=0.0)
    print("first line\nsecond line", file=stream)  # two writes: the text, then its newline
    stream.write("a logger's record\n")
    other = threading.Thread(target=lambda: stream.write("other thread\n"))
    stream.write("unfinished ")
    other.start()
    other.join()
    stream.write("then finished\n")
    lines = target.getvalue().splitlines()
    assert all(PROGRESS_LINE.match(line) for line in lines)
    text = [PROGRESS_LINE.sub("", line) for line in lines]
    assert text == [
        "first line",
        "  second line",
        "a logger's record",
        "other thread",
        "unfinished then finished",
    ]


def test_a_group_whose_last_shard_is_done_prints_its_counts_once() -> None:
    # interval 0: every finished shard's line is due; the last one's is left to the group's end
    # line (it was printed twice at the same moment: the last shard's line, then the end line).
    console = Console(file=io.StringIO(), force_terminal=False, width=200)
    display = RunDisplay(console, interval=0.0)
    display.group("clean..dedup", 2, 0)
    display.task("clean..dedup", 10, 1000)
    display.task("clean..dedup", 10, 1000)
    display.step("dedup: fitting over the whole corpus")
    said = [PROGRESS_LINE.sub("", line) for line in console.file.getvalue().splitlines()]  # type: ignore[attr-defined]
    counts = [line.split(", ")[0] for line in said if "shards" in line]
    assert counts == ["clean..dedup: 1/2 shards", "clean..dedup: 2/2 shards"]
    assert said[-1] == "dedup: fitting over the whole corpus"
