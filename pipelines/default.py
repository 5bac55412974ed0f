"""The default recipe: the stages every corpus goes through, in order (see DESIGN.md)."""

from __future__ import annotations

from dataclean.stage import Stage
from dataclean.stages.clean import CleanText
from dataclean.stages.quarantine import DropQuarantined


def build() -> list[Stage]:
    """clean -> (dedup -> split -> perplexity -> quarantine, as they land)."""
    return [
        CleanText(),
        DropQuarantined(),  # last: a no-op until `--quarantine LIST` (quarantine.path) is given
    ]
