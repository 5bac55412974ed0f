"""What reaches a piped or logged stderr during a run, as one log: every line stamped, no colour.

When `dataclean run`'s stderr is not a terminal, the display (`dataclean.cli.progress`) prints
timestamped lines (`[ 12.3s] ...`). Other lines reach the same output while a run goes: Ray's
driver prints the messages its raylets and GCS push (a task retried, a node marked dead) as
`\\x1b[33m(raylet)\\x1b[0m Task ... failed`, on stdout, unstamped and in colour; Ray's and
dataclean's loggers write to stderr. For the run's duration `piped_output` points `sys.stdout`
and `sys.stderr` at one `StampedStream` over the real stderr, which:

- stamps each message with the seconds since the command started, as the display does (a line
  that already carries a stamp, the display's own, is left as it is);
- removes terminal escape sequences (colours, cursor moves): a log file is not a terminal;
- keeps a multi-line message together: `print` writes a message and its newline in two calls,
  a logger in one; a message ends with a write that ends a line, and it is written at once, its
  continuation lines stamped alike and indented under the first, so no other message cuts in.
  Each thread's unfinished message is kept apart, so two threads printing never mix.

Ray's messages go to stderr with the rest: they say what happens to the run, and stdout keeps
only what the command prints when it ends (the summary table, after this is undone).
What Ray's C++ core writes to the process's file descriptor 2 itself bypasses Python and is not
stamped: the crash report it prints when the driver is killed by a signal, for one.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
import threading
import time
from collections.abc import Iterator
from typing import TextIO

# CSI (colours, cursor), OSC (titles, links) and two-character escape sequences.
ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
# The display's own stamp: "[ 12.3s] " (`dataclean.cli.progress.stamp`).
STAMPED = re.compile(r"^\[ *\d+\.\ds\] ")
# A message with no end of line is written once it holds this much (a runaway write).
MAX_PENDING = 1 << 16


def stamp(started: float, now: float | None = None) -> str:
    """The stamp of a line: seconds since `started` (`time.time()`), "[ 12.3s]"."""
    return f"[{(time.time() if now is None else now) - started:5.1f}s]"


def stamp_message(text: str, started: float, now: float | None = None) -> str:
    """`text` (one message, one line or more, without its last newline) as stamped lines: colour
    codes removed, blank lines dropped, each line stamped, lines after the first indented by
    two spaces. A message that starts with a stamp keeps it for all its lines."""
    lines = [line.rstrip() for line in ESCAPES.sub("", text).replace("\r", "\n").split("\n")]
    lines = [line for line in lines if line.strip()]
    if not lines:
        return ""
    found = STAMPED.match(lines[0])
    if found:
        prefix, lines[0] = found.group(0).rstrip(), lines[0][found.end() :]
    else:
        prefix = stamp(started, now)
    first, *rest = lines
    return "".join([f"{prefix} {first}\n", *(f"{prefix}   {line}\n" for line in rest)])


class StampedStream(io.TextIOBase):
    """A text stream that writes each message to `target` stamped (module docstring)."""

    def __init__(self, target: TextIO, started: float) -> None:
        super().__init__()
        self._target = target
        self._started = started
        self._pending: dict[int, str] = {}  # thread id -> its message so far
        self._lock = threading.Lock()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._target, "encoding", None) or "utf-8"

    def write(self, text: str) -> int:
        thread = threading.get_ident()
        with self._lock:
            pending = self._pending.pop(thread, "") + text
            if pending.endswith("\n") or len(pending) >= MAX_PENDING:
                self._emit(pending.removesuffix("\n"))
            else:
                self._pending[thread] = pending
        return len(text)

    def _emit(self, message: str) -> None:
        lines = stamp_message(message, self._started)
        if lines:
            self._target.write(lines)
            self._target.flush()

    def flush(self) -> None:
        with self._lock:
            self._target.flush()

    def finish(self) -> None:
        """Write what is left unfinished (a message without its newline) and flush."""
        with self._lock:
            for message in self._pending.values():
                self._emit(message)
            self._pending.clear()
            self._target.flush()


@contextlib.contextmanager
def piped_output(started: float) -> Iterator[StampedStream | None]:
    """Within this block, when stderr is not a terminal, `sys.stdout` and `sys.stderr` write
    stamped messages to the real stderr (module docstring); on a terminal nothing changes (the
    live display shows Ray's lines above its bar itself). Yields the stream, or None."""
    real_out, real_err = sys.stdout, sys.stderr
    if real_err is None or real_err.isatty():
        yield None
        return
    stream = StampedStream(real_err, started)
    sys.stdout = sys.stderr = stream
    try:
        yield stream
    finally:
        sys.stdout, sys.stderr = real_out, real_err
        stream.finish()
