"""The `dataclean run` display of a run's progress (`dataclean.run.progress` events), on stderr.

On a terminal: each step as a line with the seconds since the command started, and under them a
live line for what runs now (a spinner and its seconds, or the group's bar with shards, rows,
MB and MB/s). Piped or logged: the same step lines, plain, and for a group a line when it
starts, at most every `interval` seconds while it runs (also when nothing changed: the run is
alive), and when it ends; the other lines of the run reach the same output stamped alike
(`dataclean.cli.piped`). A note (a node of a cluster compiling its kernels) is a line of its own
that leaves the group's bar as it is. Seconds count from the command's start (the process's start
time where the system tells it, else the import of this module).

Each group line is printed once: the periodic line is decided under the same lock that prints it
(the display's ticker and the thread that reports a finished shard could both find it due, and
printed it twice at the same moment), and a group whose last shard is done waits for its end
line rather than print the same counts twice.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from dataclean.cli.piped import stamp


def _process_started() -> float:
    """`time.time()` when this process started: /proc's start time on Linux, else now."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as uptime:
            since_boot = float(uptime.read().split()[0])
        return time.time() - since_boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.time()


STARTED = _process_started()


@dataclass
class _Group:
    label: str
    shards: int
    done: int
    skipped: int
    rows: int = 0
    text_bytes: int = 0
    started: float = 0.0

    def line(self) -> str:
        seconds = max(time.time() - self.started, 1e-9)
        megabytes = self.text_bytes / 1e6
        skipped = f", {self.skipped:,} done before (skipped)" if self.skipped else ""
        return (
            f"{self.label}: {self.done:,}/{self.shards:,} shards{skipped}, {self.rows:,} rows, "
            f"{megabytes:,.1f} MB, {megabytes / seconds:,.1f} MB/s"
        )


class RunDisplay:
    """A `RunProgress` for the CLI (module docstring); a context manager around the run."""

    def __init__(self, console: Console, interval: float = 10.0) -> None:
        self.console = console
        self.live = console.is_terminal
        self.interval = interval
        self._group: _Group | None = None
        self._last_line = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._bar = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(bar_width=20),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            disable=not self.live,
        )
        self._task = self._bar.add_task("", total=None, detail="")

    def __enter__(self) -> RunDisplay:
        if self.live:
            self._bar.start()
        else:
            self._ticker = threading.Thread(target=self._tick, name="dataclean-progress", daemon=True)
            self._ticker.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._group is not None and kind is None:
            self._print(self._group.line())
        self._group = None
        if self.live:
            self._bar.stop()

    def _print(self, text: str) -> None:
        with self._lock:
            self._print_locked(text)

    def _print_locked(self, text: str) -> None:
        self._last_line = time.time()
        line = f"{stamp(STARTED, self._last_line)} {text}"
        self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def _print_if_due(self) -> None:
        """Piped: the group's line, when `interval` seconds passed since the last line and its
        last shard is not done (its end line follows then). Decided and printed under one lock."""
        with self._lock:
            group = self._group
            if group is None or group.done >= group.shards:
                return
            if time.time() - self._last_line >= self.interval:
                self._print_locked(group.line())

    def note(self, text: str) -> None:
        """A line of its own (a cluster's node compiling); the live line goes on as it was."""
        if self.live:
            self._bar.console.print(f"{stamp(STARTED)} {text}", markup=False, highlight=False, soft_wrap=True)
        else:
            self._print(text)

    def step(self, text: str) -> None:
        """A new activity: its line, and the live line shows it."""
        with self._lock:
            if self._group is not None:  # the group before it has ended
                self._print_locked(self._group.line())
                self._group = None
            self._print_locked(text)
        self._bar.update(self._task, description=text, total=None, completed=0, detail="")
        self._bar.reset(self._task)

    def group(self, label: str, shards: int, skipped: int) -> None:
        """A group starts: a step line, then its bar (or periodic lines)."""
        self.step(label)
        with self._lock:
            self._group = _Group(label, shards, skipped, skipped, started=time.time())
        self._bar.update(self._task, total=shards, completed=skipped, detail=self._detail())

    def task(self, label: str, rows: int, text_bytes: int) -> None:
        """A shard of the group is done."""
        group = self._group
        if group is None:
            return
        group.done += 1
        group.rows += rows
        group.text_bytes += text_bytes
        self._bar.update(self._task, completed=group.done, detail=self._detail())
        if not self.live:
            self._print_if_due()

    def _detail(self) -> str:
        group = self._group
        if group is None:
            return ""
        return group.line().split(": ", 1)[1]

    def _tick(self) -> None:
        """Piped: a line at least every `interval` seconds while a group runs."""
        while not self._stop.wait(1.0):
            self._print_if_due()
