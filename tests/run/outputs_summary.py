"""What a user sees of a run, as one JSON-able dict: kept ids, every exclusion's reason, the
languages of the kept rows, the stats' counts and the report's sections (not timings).

Used by tests/run/test_same_outputs.py, and as a script to record the fixture it compares with:

    PYTHONPATH=CHECKOUT python tests/run/outputs_summary.py OUT_FOLDER > summary.json

runs today's stages, in an explicit recipe, over the bundled sample with the local executor (it
imports only what every version of dataclean since the language stage has: `run_pipeline`, the
stage classes and `LocalExecutor`).
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds


def todays_stages() -> list[Any]:
    """clean -> language -> dedup -> split -> perplexity -> perplexity_filter -> quarantine, with
    the default recipe's settings of today (the default recipe itself grows new stages)."""
    from dataclean.stages.clean import CleanText
    from dataclean.stages.dedup import DropDuplicates
    from dataclean.stages.language import IdentifyLanguage
    from dataclean.stages.perplexity import FilterPerplexity, ScorePerplexity
    from dataclean.stages.quarantine import DropQuarantined
    from dataclean.stages.split import SplitLongDocuments

    return [
        CleanText(),
        IdentifyLanguage(),
        DropDuplicates(),
        SplitLongDocuments(),
        ScorePerplexity(),
        FilterPerplexity(drop_fraction=0.002),
        DropQuarantined(),
    ]


def _rows(folder: Path, columns: list[str]) -> list[dict[str, Any]]:
    if not folder.exists():
        return []
    dataset = ds.dataset(str(folder), format="parquet")
    present = [name for name in columns if name in dataset.schema.names]
    return list(dataset.to_table(columns=present).to_pylist())


def summarize_output(out: Path) -> dict[str, Any]:
    """The summary of a finished run's folder (module docstring)."""
    kept = _rows(out / "data", ["id", "lang"])
    excluded = _rows(out / "excluded", ["id", "reason"])
    stats = json.loads((out / "stats.json").read_text())
    sections = re.findall(r'<section id="([^"]+)"><h2>([^<]*)</h2>', (out / "report.html").read_text())
    return {
        "kept": sorted(str(row["id"]) for row in kept),
        "kept_langs": dict(sorted(Counter(str(row.get("lang")) for row in kept).items())),
        "excluded": sorted([str(row["id"]), str(row["reason"])] for row in excluded),
        "totals": stats["totals"],
        "stages": [
            {key: row[key] for key in ("stage", "rows_in", "rows_out", "rows_added", "dropped")}
            for row in stats["stages"]
        ],
        "report_sections": [list(section) for section in sections],
    }


def run_and_summarize(sample: Path, out: Path) -> dict[str, Any]:
    """Run `todays_stages` over `sample` into `out` (local executor) and summarize it."""
    from dataclean.executors.local import LocalExecutor
    from dataclean.run import run_pipeline

    run_pipeline([str(sample)], str(out), todays_stages(), LocalExecutor(), overwrite=True)
    return summarize_output(out)


if __name__ == "__main__":
    import dataclean

    sample = Path(dataclean.__file__).parent / "data" / "sample"
    json.dump(run_and_summarize(sample, Path(sys.argv[1])), sys.stdout, indent=1, ensure_ascii=False)
    print()
