"""The output folder of a run: every name under OUT/, in one place (docs/contracts.md, "Output folder").

    OUT/data/          kept rows (Parquet, `part-NNNNN.parquet`)
    OUT/excluded/      dropped rows with `stage` and `reason`
    OUT/quarantined/   rows the quarantine list touched, with `action`
    OUT/stats.json     counts and seconds per stage, the row accounting
    OUT/manifest.json  config, config hash, inputs; `complete` once the run finished
    OUT/report.html    the run report
    OUT/contamination.parquet  with decontaminate: the rows sharing n-grams with eval items
    OUT/_work/         intermediate files between stage groups (removed after a run)

The run layer writes it (`dataclean.run`, `dataclean.run.shard`), the report and `dataclean feedback`
read it; none of them spells a name of it.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

DATA = "data"
EXCLUDED = "excluded"
QUARANTINED = "quarantined"
# The Parquet folders of an output, in the order the report reads them.
FOLDERS = (DATA, EXCLUDED, QUARANTINED)
STATS = "stats.json"
MANIFEST = "manifest.json"
REPORT = "report.html"
CONTAMINATION = "contamination.parquet"  # the decontaminate stage's records (Outputs.records)
WORK = "_work"
# What a run writes under OUT/ besides the manifest (what `--overwrite` removes, with it).
OUTPUT_ENTRIES = (DATA, EXCLUDED, QUARANTINED, WORK, STATS, REPORT, CONTAMINATION)


@dataclass(frozen=True)
class Layout:
    """Where a run's files go under OUT/ (the module docstring lists them)."""

    root: str

    @property
    def data(self) -> str:
        return posixpath.join(self.root, DATA)

    def folder(self, destination: str) -> str:
        return posixpath.join(self.root, destination)

    @property
    def stats(self) -> str:
        return posixpath.join(self.root, STATS)

    @property
    def manifest(self) -> str:
        return posixpath.join(self.root, MANIFEST)

    @property
    def report(self) -> str:
        return posixpath.join(self.root, REPORT)

    @property
    def work(self) -> str:
        return posixpath.join(self.root, WORK)

    def group(self, group: int) -> str:
        return posixpath.join(self.work, f"g{group}")

    def done_marker(self, group: int, shard_index: int) -> str:
        return posixpath.join(self.group(group), f"{shard_index:05d}.done.json")

    def records(self, stage_name: str) -> str:
        """Where workers write a stage's records (`Outputs.records`) until the run merges them."""
        return posixpath.join(self.work, f"records-{stage_name}")

    def summaries(self, group: int) -> str:
        return posixpath.join(self.group(group), "summary")

    @staticmethod
    def shard_stem(index: int) -> str:
        """The name a shard's files in `_work` start with (then `-{part}.parquet`)."""
        return f"{index:05d}"

    @staticmethod
    def shard_of(path: str) -> int:
        """The shard index of a file in `_work` named by `shard_stem`."""
        return int(posixpath.basename(path).split("-", 1)[0])
