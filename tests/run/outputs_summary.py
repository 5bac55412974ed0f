"""What a user sees of a run, as one JSON-able dict: kept ids, every exclusion's reason, the
languages of the kept rows, the stats' counts and the report's sections (not timings).

Used by tests/run/test_same_outputs.py, and as a script to record the fixture it compares with:

    PYTHONPATH=CHECKOUT python tests/run/outputs_summary.py OUT_FOLDER > summary.json

runs today's stages, in an explicit recipe, over the bundled sample with the local executor (it
imports only what every version of dataclean since the language stage has: `run_pipeline`, the
stage classes and `LocalExecutor`). The sample leaves out the documents whose outcome other
issues changed by design since f9d3e2a (`MOVED_RULE_IDS`): the 8 that `clean:repetition` dropped
(issue 23 moved the rule to the quality stage) and 6 that the clean stage's new checks decide
otherwise; this comparison of the restructuring must not see those.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
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


# The documents `clean:repetition` dropped at f9d3e2a (see the module docstring).
MOVED_RULE_IDS = frozenset(
    {
        "46fao5l32kf2maca6fpkia73boqjbcka",
        "qfa7nvm3552lopxk2rp6r6puhbvnd6fd",
        "qoh5gkys6hnul2lot7ynn6bf7kinjnxo",
        "xdsusiu44ynwxtanranmph3rtpymwfda",
        "xv6zfvicnkarfbx3tty7maniy7gldyah",
        "ydxpia66pj7nm4leupk5czgwjvt4ipee",
        "zh-repeat",
        "zofsuwdam73mzngtd2b6byk4wdet3yjd",
        # The clean stage's not-language checks and escape-sequence removal (after f9d3e2a, by
        # design): random bytes dropped, a garbage row now empty, an exact-duplicate cluster
        # whose texts became equal.
        "web-garbage",
        "y4peyzfimlrdztipudo2osp76tiokmug",
        "abval5vwenjpeofuwyb7wgaoupd25njd",
        "svxh2mqwzc5ylhzqp6veonhbe3io5lvc",
        "t2gsnre5k3kfvb6kiixrj2xabgbp4h7k",
        "xasvknbn6kjyewevdczpzsp6xkbnzvwi",
    }
)


def sample_without(sample: Path, folder: Path, ids: frozenset[str] = MOVED_RULE_IDS) -> Path:
    """A copy of the bundled sample's files without the documents whose id is in `ids` (lines
    that are not JSON, the sample's deliberate dirt, are copied as they are)."""
    import gzip

    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)

    def keep(line: bytes) -> bool:
        try:
            return json.loads(line).get("id") not in ids
        except (ValueError, AttributeError):
            return True

    web = (sample / "web.jsonl").read_bytes().splitlines(keepends=True)
    (folder / "web.jsonl").write_bytes(b"".join(line for line in web if keep(line)))
    zh = gzip.decompress((sample / "zh.jsonl.gz").read_bytes()).splitlines(keepends=True)
    (folder / "zh.jsonl.gz").write_bytes(gzip.compress(b"".join(line for line in zh if keep(line))))
    wiki = pq.read_table(sample / "wiki.parquet")
    if "id" in wiki.column_names:
        wiki = wiki.filter(pc.invert(pc.is_in(wiki.column("id"), value_set=pa.array(sorted(ids)))))
    pq.write_table(wiki, folder / "wiki.parquet")
    return folder


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
    """Run `todays_stages` over `sample_without(sample)` into `out` (local executor) and summarize."""
    from dataclean.executors.local import LocalExecutor
    from dataclean.run import run_pipeline

    inputs = sample_without(sample, out.parent / f"{out.name}-input" / "sample")
    run_pipeline([str(inputs)], str(out), todays_stages(), LocalExecutor(), overwrite=True)
    return summarize_output(out)


if __name__ == "__main__":
    import dataclean

    sample = Path(dataclean.__file__).parent / "data" / "sample"
    json.dump(run_and_summarize(sample, Path(sys.argv[1])), sys.stdout, indent=1, ensure_ascii=False)
    print()
