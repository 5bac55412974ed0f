"""The run report: `OUT/report.html`, a self-contained page of a run's funnel, drops and scores.

`write_report(out_dir, compare_to=None)` reads a finished run's folder (and an earlier run's, to
show what changed) and writes the page; `dataclean report OUT [--compare EARLIER]` does the same
from the command line; `prepare()` loads what writing one needs ahead of time. Modules: `scan`
(read the folder), one module per part of the report (`excerpts`, `perplexity`, `lengths`,
`clusters`, `compare`), `collect` (all parts), `charts` (plotly figures) and `page` (HTML).
"""

from __future__ import annotations

from dataclean.report.page import prepare, write_report

__all__ = ["prepare", "write_report"]
