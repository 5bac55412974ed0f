"""The default recipe: the stages every corpus goes through, in order (see DESIGN.md)."""

from __future__ import annotations

from dataclean.stage import Stage
from dataclean.stages.clean import CleanText


def build() -> list[Stage]:
    """clean -> (dedup -> split -> perplexity -> quarantine, as they land)."""
    return [
        CleanText(),
    ]
