"""What a run tells its user while it goes: the run layer's events, with no display of its own.

`Session` and `run_pipeline` call a `RunProgress` from the first second of a run:

- `step(text)`: what the run does now ("starting Ray (embedded, 2 workers)", "compiling kernels
  (first run only, about 9 s)", "dedup: fitting", "writing report"), each a new activity;
- `group(label, shards, skipped)`: a group of row-local stages (ending at a barrier's observe,
  `dataclean.run.plan`) starts over `shards` shards, `skipped` of them done by an earlier run of
  the same config (a resumed run: the display says what it skips);
- `task(label, rows, text_bytes)`: one of the group's shards is done, with its rows and UTF-8
  text bytes read, from which the display shows rows and MB done and the rate;
- `note(text)`: something that happens beside the current activity, from any thread (a node of a
  cluster compiling its kernels: `dataclean.run.node_kernels`); it ends nothing.

The CLI's display (`dataclean.cli.progress`) draws these live on a terminal and as plain
timestamped lines when its output is piped or logged; a library caller passes its own, or none.
"""

from __future__ import annotations

from typing import Protocol


class RunProgress(Protocol):
    """Receives a run's events (module docstring); every method returns at once."""

    def step(self, text: str) -> None: ...

    def group(self, label: str, shards: int, skipped: int) -> None: ...

    def task(self, label: str, rows: int, text_bytes: int) -> None: ...

    def note(self, text: str) -> None: ...


class Silent:
    """A `RunProgress` that shows nothing (`--quiet`, and a library call given none)."""

    def step(self, text: str) -> None:
        """Nothing to show."""

    def group(self, label: str, shards: int, skipped: int) -> None:
        """Nothing to show."""

    def task(self, label: str, rows: int, text_bytes: int) -> None:
        """Nothing to show."""

    def note(self, text: str) -> None:
        """Nothing to show."""
