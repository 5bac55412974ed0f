"""What an export tells its user while it goes: its steps, and each input file as it finishes.

An exporter calls `step(text)` when it starts something ("tokenizing 12 files on Ray (2
workers)", "merging 12 shards") and `file_done(documents, tokens, text_bytes)` per input file, in
the order they finish. `Lines` prints timestamped lines to stderr (files done of all, documents,
tokens, MB/s of text read), like a run's progress when its output is piped; `Silent` prints none
(a library call, `--quiet`).
"""

from __future__ import annotations

import sys
import time
from typing import Protocol, TextIO


class ExportProgress(Protocol):
    """Receives an export's events; every method returns at once."""

    def step(self, text: str) -> None: ...

    def files(self, total: int, skipped: int) -> None: ...

    def file_done(self, documents: int, tokens: int, text_bytes: int) -> None: ...


class Silent:
    """Shows nothing."""

    def step(self, text: str) -> None:
        """Nothing to show."""

    def files(self, total: int, skipped: int) -> None:
        """Nothing to show."""

    def file_done(self, documents: int, tokens: int, text_bytes: int) -> None:
        """Nothing to show."""


class Lines:
    """Timestamped progress lines (seconds since the export started) on `stream`."""

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.started = time.perf_counter()
        self.total = self.done = self.documents = self.tokens = self.text_bytes = 0
        self.files_started = self.started

    def _print(self, text: str) -> None:
        print(
            f"[{time.perf_counter() - self.started:7.1f} s] {self.label}: {text}",
            file=self.stream,
            flush=True,
        )

    def step(self, text: str) -> None:
        self._print(text)

    def files(self, total: int, skipped: int) -> None:
        self.total, self.done = total, skipped
        self.files_started = time.perf_counter()
        if skipped:
            self._print(f"resuming: {skipped} of {total} files done by an earlier run, skipped")

    def file_done(self, documents: int, tokens: int, text_bytes: int) -> None:
        self.done += 1
        self.documents += documents
        self.tokens += tokens
        self.text_bytes += text_bytes
        seconds = max(time.perf_counter() - self.files_started, 1e-9)
        self._print(
            f"{self.done}/{self.total} files, {self.documents:,} documents, {self.tokens:,} tokens "
            f"({self.text_bytes / seconds / 1e6:.1f} MB/s of text)"
        )
