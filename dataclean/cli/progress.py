"""The `dataclean run` display of a run's progress (`dataclean.run.progress` events), on stderr.

On a terminal: each step as a line with the seconds since the command started, and under them a
live line for what runs now (a spinner and its seconds, or the group's bar with shards, rows,
MB and MB/s). Piped or logged: the same step lines, plain, and for a group a line when it
starts, at most every `interval` seconds while it runs (also when nothing changed: the run is
alive), and when it ends. Seconds count from the command's start (the process's start time where
the system tells it, else the import of this module).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn


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
            self._last_line = time.time()
            line = f"[{time.time() - STARTED:5.1f}s] {text}"
            self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def step(self, text: str) -> None:
        """A new activity: its line, and the live line shows it."""
        if self._group is not None:  # the group before it has ended
            self._print(self._group.line())
            self._group = None
        self._print(text)
        self._bar.update(self._task, description=text, total=None, completed=0, detail="")
        self._bar.reset(self._task)

    def group(self, label: str, shards: int, skipped: int) -> None:
        """A group starts: a step line, then its bar (or periodic lines)."""
        self.step(label)
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
        if not self.live and time.time() - self._last_line >= self.interval:
            self._print(group.line())

    def _detail(self) -> str:
        group = self._group
        if group is None:
            return ""
        return group.line().split(": ", 1)[1]

    def _tick(self) -> None:
        """Piped: a line at least every `interval` seconds while a group runs."""
        while not self._stop.wait(1.0):
            group = self._group
            if group is not None and time.time() - self._last_line >= self.interval:
                self._print(group.line())
