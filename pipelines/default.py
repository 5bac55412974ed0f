"""The default recipe: the stages every corpus goes through, in order (see DESIGN.md)."""

from __future__ import annotations

from dataclean.stage import Stage
from dataclean.stages.clean import CleanText
from dataclean.stages.perplexity import FilterPerplexity, ScorePerplexity


def build() -> list[Stage]:
    """clean -> (dedup -> split, as they land) -> perplexity -> perplexity_filter -> (quarantine)."""
    return [
        CleanText(),
        ScorePerplexity(),
        # Buckets at the corpus's 30th/60th percentiles per language; drop the worst 0.2%.
        FilterPerplexity(drop_fraction=0.002),
    ]
