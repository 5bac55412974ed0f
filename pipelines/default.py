"""The default recipe: the stages every corpus goes through, in order (docs/stages.md says what each does)."""

from __future__ import annotations

from dataclean.stage import Stage
from dataclean.stages.classify import ScoreQuality
from dataclean.stages.clean import CleanText
from dataclean.stages.decontaminate import DropContaminated
from dataclean.stages.dedup import DropDuplicates
from dataclean.stages.language import IdentifyLanguage
from dataclean.stages.perplexity import FilterPerplexity, ScorePerplexity
from dataclean.stages.pii import RedactPersonalData
from dataclean.stages.quality import FilterQuality
from dataclean.stages.quarantine import DropQuarantined
from dataclean.stages.split import SplitLongDocuments


def build() -> list[Stage]:
    """clean -> pii -> language -> quality -> dedup -> [decontaminate] -> split -> perplexity
    -> perplexity_filter -> [classify] -> quarantine."""
    return [
        CleanText(),
        # Right after clean, before anything is written: rows clean or the reader excluded are
        # redacted by this stage when they are written (Stage.redacts).
        RedactPersonalData(),
        # Right after clean: dedup's shingles and the perplexity model follow the language.
        # Keeps every language unless `--set language.keep=zh,en`.
        IdentifyLanguage(),
        # Right after language (its thresholds follow `lang`), before dedup as FineWeb orders it:
        # Gopher repetition and quality, C4, FineWeb, long n-gram runs (datatrove's reasons).
        FilterQuality(),
        # Before split: duplicates are whole documents, not chunks.
        DropDuplicates(),
        # A no-op until `--set decontaminate.evals=NAME=PATH,...`; after dedup (each copy of an
        # eval text is matched once), before split (a whole document is judged, not a chunk).
        DropContaminated(),
        SplitLongDocuments(),
        ScorePerplexity(),
        # Buckets at the corpus's 30th/60th percentiles per language; drop the worst 0.2%.
        FilterPerplexity(drop_fraction=0.002),
        # A no-op until `--set classify.models=NAME:PATH` names a fastText quality classifier.
        ScoreQuality(),
        DropQuarantined(),  # last: a no-op until `--quarantine LIST` (quarantine.path) is given
    ]
