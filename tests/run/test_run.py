"""Whole runs: output layout, accounting invariant, stable ids, executors agree, resume/refuse."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataclean import columns as C
from dataclean.errors import OutputError
from dataclean.executors.local import LocalExecutor
from dataclean.io.readers import ReadOptions
from dataclean.run import ALREADY_COMPLETE, run_pipeline
from dataclean.stage import Stage
from dataclean.stages.clean import CleanText
from tests.conftest import SAMPLE, read_rows, write_jsonl

ROWS = [
    {"id": f"doc-{i:03d}", "text": text}
    for i, text in enumerate(
        [f"Plain text number {i}." for i in range(20)]
        + ["\x00\x01", "   ", "ab" * 100, "中文，句子。" * 3, "cafÃ© au lait"]
    )
]


def _run(inputs: list[Path] | list[str], out: Path, executor: Any = None, **kwargs: Any) -> dict[str, Any]:
    return run_pipeline(
        [str(p) for p in inputs], str(out), [CleanText()], executor or LocalExecutor(), **kwargs
    )


def _ids(folder: Path) -> list[str]:
    return sorted(row[C.ID] for row in read_rows(folder))


def test_output_layout_and_invariant_on_the_sample(tmp_path: Path) -> None:
    out = tmp_path / "out"
    stats = _run([SAMPLE], out)
    assert (out / "manifest.json").exists() and (out / "stats.json").exists()
    assert list((out / "data").glob("*.parquet")) and list((out / "excluded").glob("*.parquet"))
    assert not (out / "_work").exists()
    totals = stats["totals"]
    assert totals["invariant_holds"]
    assert (
        totals["rows_in"] + totals["rows_added"]
        == totals["kept"] + totals["excluded"] + totals["quarantined"]
    )
    assert len(read_rows(out / "data")) == totals["kept"]
    excluded = read_rows(out / "excluded")
    assert len(excluded) == totals["excluded"]
    assert all(row[C.STAGE] and row[C.REASON].startswith(row[C.STAGE] + ":") for row in excluded)
    assert json.loads((out / "stats.json").read_text()) == stats
    # Each stage's batches' CPU time beside their wall time (benchmarks compare CPU with CPU).
    assert all(stage["cpu_seconds"] >= 0.0 for stage in stats["stages"])
    assert any(stage["cpu_seconds"] > 0.0 for stage in stats["stages"])
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["complete"] and manifest["config"]["stages"][0]["stage"] == "clean"
    kept = read_rows(out / "data")
    assert all(row[C.TEXT_HASH] and row[C.WEIGHT] == 1.0 for row in kept)
    assert list(pq.read_schema(next((out / "data").glob("*.parquet"))).names[:3]) == [
        C.ID,
        C.TEXT,
        C.PARENT_ID,
    ]


def test_report_is_left_to_the_caller_when_asked(tmp_path: Path) -> None:
    # The CLI writes report.html itself while Ray shuts down; run_pipeline must not write it too.
    _run([SAMPLE], tmp_path / "without", report=False)
    assert (tmp_path / "without" / "stats.json").exists()
    assert not (tmp_path / "without" / "report.html").exists()
    _run([SAMPLE], tmp_path / "with")
    assert (tmp_path / "with" / "report.html").stat().st_size > 0


def test_reasons_are_asserted_per_row(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _run([write_jsonl(tmp_path / "in.jsonl", ROWS)], out)
    reasons = {row[C.ID]: row[C.REASON] for row in read_rows(out / "excluded")}
    # doc-022 ("abab..."): a long n-gram run, the quality stage's (not in this recipe)
    assert reasons == {"doc-020": "clean:empty", "doc-021": "clean:empty"}
    kept = {row[C.ID]: row[C.TEXT] for row in read_rows(out / "data")}
    assert kept["doc-024"] == "café au lait"


def test_ids_and_results_do_not_depend_on_shard_count(tmp_path: Path) -> None:
    one = write_jsonl(tmp_path / "one.jsonl", ROWS)
    (tmp_path / "three").mkdir()
    parts = [write_jsonl(tmp_path / "three" / f"p{i}.jsonl", ROWS[i::3]) for i in range(3)]
    _run([one], tmp_path / "out1")
    _run(parts, tmp_path / "out3")
    assert _ids(tmp_path / "out1" / "data") == _ids(tmp_path / "out3" / "data")
    assert _ids(tmp_path / "out1" / "excluded") == _ids(tmp_path / "out3" / "excluded")


def test_derived_ids_do_not_depend_on_batch_size(tmp_path: Path) -> None:
    text = tmp_path / "lines.txt"
    text.write_text("\n".join(f"line {i}" for i in range(50)))
    _run([text], tmp_path / "a", read_options=ReadOptions(batch_rows=7))
    _run([text], tmp_path / "b", read_options=ReadOptions(batch_rows=1000))
    assert _ids(tmp_path / "a" / "data") == _ids(tmp_path / "b" / "data")
    assert "lines.txt:49" in _ids(tmp_path / "a" / "data")


def _table(folder: Path) -> list[dict[str, Any]]:
    return sorted(read_rows(folder), key=lambda row: row[C.ID])


def test_local_and_ray_executors_write_the_same_output(tmp_path: Path, ray_executor: Any) -> None:
    local = _run([SAMPLE], tmp_path / "local")
    on_ray = _run([SAMPLE], tmp_path / "ray", executor=ray_executor)
    for sub in ("data", "excluded"):
        assert _table(tmp_path / "local" / sub) == _table(tmp_path / "ray" / sub)
    assert local["totals"] == on_ray["totals"]
    assert local["reasons"] == on_ray["reasons"]


def test_rerun_same_config_resumes_and_changed_config_refuses(tmp_path: Path) -> None:
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    out = tmp_path / "out"
    first = _run([inp], out)
    # A rerun into the finished output runs nothing and says so (the CLI prints it).
    assert _run([inp], out) == {**first, ALREADY_COMPLETE: True}
    with pytest.raises(OutputError, match=r"clean\.fix_mojibake: True -> False"):
        run_pipeline([str(inp)], str(out), [CleanText(fix_mojibake=False)], LocalExecutor())
    run_pipeline([str(inp)], str(out), [CleanText(fix_mojibake=False)], LocalExecutor(), overwrite=True)
    kept = {row[C.ID]: row[C.TEXT] for row in read_rows(out / "data")}
    assert kept["doc-024"] == "cafÃ© au lait"  # the rerun used the new setting


def test_resume_after_an_interrupted_run_gives_identical_output(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    for i in range(3):
        write_jsonl(tmp_path / "in" / f"p{i}.jsonl", ROWS[i::3])
    full = _run([tmp_path / "in"], tmp_path / "full")

    class Crash(Exception):
        pass

    class CrashAfterOne(LocalExecutor):
        def map(self, fn: Any, items: Any, on_result: Any = None, light: bool = False) -> Any:
            fn(items[0])
            raise Crash()

    with pytest.raises(Crash):
        _run([tmp_path / "in"], tmp_path / "part", executor=CrashAfterOne())
    resumed = _run([tmp_path / "in"], tmp_path / "part")
    assert _table(tmp_path / "full" / "data") == _table(tmp_path / "part" / "data")
    assert resumed["totals"] == full["totals"]


def test_existing_folder_that_is_not_an_output_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    with pytest.raises(OutputError, match="not a dataclean output"):
        _run([SAMPLE], out)


def test_bad_shard_is_logged_whole_with_skip(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    write_jsonl(tmp_path / "in" / "good.jsonl", ROWS[:5])
    (tmp_path / "in" / "bad.parquet").write_bytes(b"\x00garbage, not parquet")
    stats = _run([tmp_path / "in"], tmp_path / "out", read_options=ReadOptions(on_error="skip"))
    excluded = read_rows(tmp_path / "out" / "excluded")
    assert [(row[C.ID], row[C.STAGE]) for row in excluded] == [("bad.parquet", "read")]
    assert excluded[0][C.REASON].startswith("read:error:not a readable Parquet file")
    assert stats["totals"]["invariant_holds"] and stats["totals"]["kept"] == 5


def test_stage_error_on_one_row_is_isolated(tmp_path: Path) -> None:
    class FailsOnX(CleanText):
        def __call__(self, table: pa.Table) -> pa.Table:
            if "boom" in table.column(C.TEXT).to_pylist():
                raise ValueError("cannot handle boom")
            return super().__call__(table)

    inp = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": "fine"}, {"id": "b", "text": "boom"}])
    stats = run_pipeline(
        [str(inp)], str(tmp_path / "out"), [FailsOnX()], LocalExecutor(), ReadOptions(on_error="skip")
    )
    assert {r[C.ID]: r[C.REASON] for r in read_rows(tmp_path / "out" / "excluded")} == {
        "b": "clean:error:ValueError"
    }
    assert stats["totals"]["kept"] == 1
    from dataclean.errors import StageError

    # The default (on_error="raise"): the batch's error as it is, no retry row by row.
    with pytest.raises(
        StageError, match=r"batch of 2 rows \(ids 'a' to 'b'\): ValueError: cannot handle boom"
    ):
        run_pipeline([str(inp)], str(tmp_path / "out2"), [FailsOnX()], LocalExecutor())


@dataclass
class CountsCalls(Stage):
    """Raises `error` on every call and counts its calls in a file (stages may run in workers)."""

    name: ClassVar[str] = "counts"
    calls: str = ""
    error: str = "ValueError"

    def __call__(self, table: pa.Table) -> pa.Table:
        path = Path(self.calls)
        path.write_text(str(int(path.read_text() or 0) + 1) if path.exists() else "1")
        raise {"ValueError": ValueError, "MemoryError": MemoryError}[self.error]("failed")


@pytest.mark.parametrize(
    ("on_error", "error", "calls", "raised"),
    [
        ("raise", "ValueError", 1, "StageError"),  # no retry: a batch-level bug shows as it is
        ("skip", "ValueError", 1 + 3, None),  # the batch, then each of its 3 rows
        ("skip", "MemoryError", 1, "MemoryError"),  # never a crawl row by row
        ("raise", "MemoryError", 1, "MemoryError"),
    ],
)
def test_a_failed_batch_is_retried_row_by_row_only_under_skip_and_never_for_memory_errors(
    tmp_path: Path, on_error: str, error: str, calls: int, raised: str | None
) -> None:
    inp = write_jsonl(tmp_path / "in.jsonl", [{"id": k, "text": k} for k in ("a", "b", "c")])
    stage = CountsCalls(str(tmp_path / "calls"), error)
    options = ReadOptions(on_error=on_error)  # type: ignore[arg-type]
    if raised is None:
        stats = run_pipeline([str(inp)], str(tmp_path / "out"), [stage], LocalExecutor(), options)
        assert stats["totals"]["excluded"] == 3 and stats["totals"]["invariant_holds"]
    else:
        with pytest.raises(BaseException) as caught:
            run_pipeline([str(inp)], str(tmp_path / "out"), [stage], LocalExecutor(), options)
        assert type(caught.value).__name__ == raised
    assert int((tmp_path / "calls").read_text()) == calls


def test_uris_go_through_pyarrow_filesystems(tmp_path: Path) -> None:
    """Inputs and outputs as URIs (here file://; s3://, gs://, hdfs:// take the same path)."""
    (tmp_path / "in").mkdir()
    write_jsonl(tmp_path / "in" / "a.jsonl", ROWS)
    stats = run_pipeline([f"file://{tmp_path}/in"], f"file://{tmp_path}/out", [CleanText()], LocalExecutor())
    assert stats["totals"]["kept"] == len(read_rows(tmp_path / "out" / "data")) == 23
    assert {row[C.ID] for row in read_rows(tmp_path / "out" / "data")} >= {"doc-000", "doc-024"}
