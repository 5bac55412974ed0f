"""Everything the report shows, gathered from an output folder (and an earlier one to compare).

Each part is computed by its own module from the folder's files; a part whose columns or stage
are absent from the run is None, and the page leaves its section out.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from dataclean.report.clusters import ClusterSummary, cluster_summary
from dataclean.report.compare import Comparison, compare_runs
from dataclean.report.drops import drops_by_language
from dataclean.report.excerpts import Excerpt, sample_excerpts
from dataclean.report.languages import LanguageSummary, language_summary
from dataclean.report.lengths import LengthSummary, length_summary
from dataclean.report.perplexity import LanguagePerplexity, perplexity_summary
from dataclean.report.scan import Output, load_output


@dataclass
class RunReport:
    """The data behind one report page."""

    output: Output
    excerpts: dict[str, list[Excerpt]]
    perplexity: dict[str, LanguagePerplexity] | None
    languages: LanguageSummary | None
    lengths: LengthSummary | None
    clusters: ClusterSummary | None
    comparison: Comparison | None
    generated_at: str
    # {reason kind: {language: rows}} of the dropped rows (which rule drops what in each language)
    drops_by_language: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def stages(self) -> list[dict[str, Any]]:
        """The funnel: stats.json's per-stage rows, in pipeline order."""
        return list(self.output.stats.get("stages", []))

    @property
    def reasons(self) -> dict[str, int]:
        """Dropped rows per reason kind, largest first (stats.json's `reasons`)."""
        return dict(self.output.stats.get("reasons", {}))


def build_report(root: str, compare_to: str | None = None) -> RunReport:
    """Read `root` (and `compare_to`, an earlier run's folder) into a `RunReport`."""
    output = load_output(root)
    # Each part reads the folder on its own; most of the work is pyarrow's (Parquet reads, regex,
    # group-by), which releases the GIL, so the parts overlap in threads.
    with ThreadPoolExecutor(4, thread_name_prefix="dataclean-report") as pool:
        excerpts = pool.submit(sample_excerpts, output)
        perplexity = pool.submit(perplexity_summary, output)
        lengths = pool.submit(length_summary, output)
        languages = pool.submit(language_summary, output)
        clusters = pool.submit(cluster_summary, output)
        by_language = pool.submit(drops_by_language, output)
        comparison = compare_runs(output, load_output(compare_to)) if compare_to else None
        return RunReport(
            output=output,
            excerpts=excerpts.result(),
            perplexity=perplexity.result(),
            languages=languages.result(),
            lengths=lengths.result(),
            clusters=clusters.result(),
            comparison=comparison,
            generated_at=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            drops_by_language=by_language.result(),
        )
