"""Faults: killed workers and drivers, bad shards of every kind; results never change."""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataclean import columns as C
from dataclean.executors.local import LocalExecutor
from dataclean.io.readers import ReadOptions
from dataclean.run import run_pipeline
from dataclean.stage import Stage
from dataclean.stages.clean import CleanText
from tests.conftest import FIXTURE_ROOT, ROOT, SAMPLE, read_rows, write_jsonl

RECIPE = FIXTURE_ROOT / "slow_recipe.py"
HUGE_TEXT = "Fifty megabytes of prose. " * 2_000_000


def _rows(folder: Path) -> list[dict[str, Any]]:
    return sorted(read_rows(folder), key=lambda row: (row[C.ID], row.get(C.REASON) or ""))


def _same_output(a: Path, b: Path) -> None:
    for sub in ("data", "excluded", "quarantined"):
        assert _rows(a / sub) == _rows(b / sub), sub
    stats_a = json.loads((a / "stats.json").read_text())
    stats_b = json.loads((b / "stats.json").read_text())
    assert stats_a["totals"] == stats_b["totals"]
    assert stats_a["reasons"] == stats_b["reasons"]
    assert stats_a["shards"] == stats_b["shards"]


@dataclass
class CrashOnce(Stage):
    """Kills its own worker process the first time it runs (a marker file says it did)."""

    name: ClassVar[str] = "crash"
    marker: str = ""

    def __call__(self, table: pa.Table) -> pa.Table:
        if not os.path.exists(self.marker):
            Path(self.marker).write_text(str(os.getpid()))
            os._exit(1)
        return table


def test_worker_killed_mid_task_is_retried_with_identical_output(tmp_path: Path, ray_executor: Any) -> None:
    marker = tmp_path / "crashed"
    reference = tmp_path / "reference"
    marker.write_text("already")  # the reference run does not crash
    run_pipeline([str(SAMPLE)], str(reference), [CleanText(), CrashOnce(str(marker))], LocalExecutor())
    marker.unlink()
    crashed = tmp_path / "crashed-run"
    run_pipeline([str(SAMPLE)], str(crashed), [CleanText(), CrashOnce(str(marker))], ray_executor)
    assert marker.exists()  # a worker really died
    _same_output(reference, crashed)


def _corpus(folder: Path, shards: int = 6, rows: int = 120) -> Path:
    folder.mkdir()
    for shard in range(shards):
        write_jsonl(
            folder / f"part{shard}.jsonl",
            [{"id": f"s{shard}-{i}", "text": "word " * (1 + (i * 7 + shard) % 23)} for i in range(rows)],
        )
    return folder


def _cli(inp: Path, out: Path) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        "-m",
        "dataclean",
        "run",
        str(inp),
        "-o",
        str(out),
        "--executor",
        "local",
        "--pipeline",
        str(RECIPE),
        "--batch-rows",
        "40",
        "--quiet",
    ]
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _markers(out: Path, group: int) -> int:
    return len(list((out / "_work" / f"g{group}").glob("*.done.json")))


@pytest.mark.parametrize(("group", "done"), [(0, 0), (0, 3), (1, 0), (1, 4)])
def test_driver_killed_at_several_points_then_resumed_gives_identical_output(
    tmp_path: Path, group: int, done: int
) -> None:
    inp = _corpus(tmp_path / "in")
    reference = tmp_path / "reference"
    assert _cli(inp, reference).wait(timeout=300) == 0
    out = tmp_path / "out"
    process = _cli(inp, out)
    deadline = time.time() + 240
    while time.time() < deadline and process.poll() is None:
        started_group = (out / "_work" / f"g{group}").exists()
        if started_group and _markers(out, group) >= done:
            break
        time.sleep(0.01)
    assert process.poll() is None, "the run ended before the kill point"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert not (out / "stats.json").exists()
    assert _cli(inp, out).wait(timeout=300) == 0
    _same_output(reference, out)


def _bad_inputs(folder: Path) -> dict[str, str]:
    """Every bad input kind of issue 7, next to good shards; returns name -> expected reason start."""
    folder.mkdir()
    write_jsonl(folder / "good.jsonl", [{"id": f"g{i}", "text": f"good text {i}"} for i in range(50)])
    (folder / "corrupt.parquet").write_bytes(b"PAR1" + os.urandom(2000))
    rows = "".join(json.dumps({"text": f"row {i} {i * i}"}) + "\n" for i in range(5000))
    (folder / "truncated.jsonl.gz").write_bytes(gzip.compress(rows.encode())[:-500])
    (folder / "random.parquet").write_bytes(os.urandom(4096))
    (folder / "random.jsonl.gz").write_bytes(os.urandom(4096))
    (folder / "empty.jsonl").write_bytes(b"")
    pq.write_table(pa.table({"text": pa.array([], pa.string())}), folder / "zero.parquet")
    write_jsonl(folder / "huge.jsonl", [{"id": "huge", "text": HUGE_TEXT}])
    return {
        "corrupt.parquet": "read:error:not a readable Parquet file",
        "truncated.jsonl.gz": "read:error:truncated",
        "random.parquet": "read:error:not a readable Parquet file",
        "random.jsonl.gz": "read:error:cannot read",
    }


def test_bad_shards_of_every_kind_are_logged_and_nothing_is_lost(tmp_path: Path) -> None:
    expected = _bad_inputs(tmp_path / "in")
    stats = run_pipeline(
        [str(tmp_path / "in")],
        str(tmp_path / "out"),
        [CleanText()],
        LocalExecutor(),
        ReadOptions(on_error="skip"),
    )
    excluded = read_rows(tmp_path / "out" / "excluded")
    shard_errors = {row[C.ID]: row[C.REASON] for row in excluded if row[C.STAGE] == "read"}
    for name, reason in expected.items():
        assert shard_errors[name].startswith(reason), (name, shard_errors[name])
    kept = {row[C.ID] for row in read_rows(tmp_path / "out" / "data")}
    assert {f"g{i}" for i in range(50)} | {"huge"} <= kept
    # The rows read whole before the truncation are kept, every one of them (the reason says
    # in which row the stream broke), and the rest of the shard is one excluded row.
    broken_line = re.search(r"in line (\d+) ", shard_errors["truncated.jsonl.gz"])
    broken_at = int(broken_line.group(1)) - 1  # type: ignore[union-attr]  # lines from 1, rows from 0
    truncated_rows = sorted(int(i.split(":")[1]) for i in kept if i.startswith("truncated.jsonl.gz:"))
    truncated = (tmp_path / "in" / "truncated.jsonl.gz").read_bytes()
    assert broken_at == zlib.decompressobj(wbits=31).decompress(truncated).count(b"\n")  # zlib's own count
    assert 4096 < broken_at < 5000 and truncated_rows == list(range(broken_at))  # a partial 3rd batch too
    assert stats["shards"]["truncated.jsonl.gz"]["rows_in"] == broken_at + 1
    totals = stats["totals"]
    assert totals["invariant_holds"]
    for empty in ("empty.jsonl", "zero.parquet"):  # read, and counted as shards of no rows
        assert stats["shards"][empty] == {**dict.fromkeys(stats["shards"][empty], 0), "invariant_holds": True}
    assert totals["kept"] + totals["excluded"] == totals["rows_in"]


def test_bad_shards_through_the_default_pipeline_on_ray_lose_nothing(
    tmp_path: Path, ray_executor: Any
) -> None:
    # Every stage of the default recipe, barriers included, on real Ray workers: the bad shards are
    # logged, the 50 MB document is split into chunks that all come out, and the books balance.
    expected = _bad_inputs(tmp_path / "in")
    stats = run_pipeline(
        [str(tmp_path / "in")],
        str(tmp_path / "out"),
        # the quality stage would drop the made-up documents the books are checked with
        [s for s in __import__("pipelines.default").default.build() if s.name != "quality"],
        ray_executor,
        ReadOptions(on_error="skip"),
    )
    excluded = read_rows(tmp_path / "out" / "excluded")
    shard_errors = {row[C.ID]: row[C.REASON] for row in excluded if row[C.STAGE] == "read"}
    assert set(shard_errors) == set(expected)
    for name, reason in expected.items():
        assert shard_errors[name].startswith(reason), (name, shard_errors[name])
    rows = read_rows(tmp_path / "out" / "data") + excluded
    chunks = [row for row in rows if row.get(C.PARENT_ID) == "huge"]
    assert len(chunks) == stats["totals"]["rows_added"] + 1 > 25_000
    # README: joining a document's chunks in k order gives back its text exactly (here all of them,
    # kept or excluded by a later stage).
    in_order = sorted(chunks, key=lambda row: int(row[C.ID].rsplit("#", 1)[1]))
    assert [row[C.ID] for row in in_order] == [f"huge#{k}" for k in range(len(chunks))]
    assert "".join(row[C.TEXT] for row in in_order) == HUGE_TEXT
    ids = [row[C.ID] for row in rows]
    assert len(ids) == len(set(ids))  # nothing duplicated
    totals = stats["totals"]
    assert totals["invariant_holds"]
    assert totals["rows_in"] + totals["rows_added"] == len(rows) + totals["quarantined"]


def test_one_and_two_workers_and_local_give_identical_output(tmp_path: Path, ray_executor: Any) -> None:
    from dataclean.executors.ray import RayExecutor

    inp = _corpus(tmp_path / "in", shards=5, rows=60)
    stages = lambda: [CleanText(), *_recipe_barrier()]  # noqa: E731
    run_pipeline([str(inp)], str(tmp_path / "local"), stages(), LocalExecutor())
    run_pipeline([str(inp)], str(tmp_path / "two"), stages(), ray_executor)
    one = RayExecutor(workers=1)
    assert one.workers == 1
    run_pipeline([str(inp)], str(tmp_path / "one"), stages(), one)
    _same_output(tmp_path / "local", tmp_path / "two")
    _same_output(tmp_path / "local", tmp_path / "one")


def _recipe_barrier() -> list[Stage]:
    from dataclean.run.recipes import load_module

    return [load_module(str(RECIPE)).LongerThanMedian()]


TWO_NODES = """
import json, subprocess, sys
from ray.cluster_utils import Cluster
cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
cluster.add_node(num_cpus=1)
cluster.wait_for_nodes()
result = subprocess.run([sys.executable, "-m", "dataclean", "run", sys.argv[1], "-o", sys.argv[2],
                         "--address", cluster.address, "--quiet"], capture_output=True, text=True)
cluster.shutdown()
print(json.dumps({"code": result.returncode, "stderr": result.stderr[-2000:]}))
"""


def test_two_node_ray_cluster_runs_the_pipeline(tmp_path: Path) -> None:
    out = tmp_path / "cluster"
    result = subprocess.run(
        [sys.executable, "-c", TWO_NODES, str(SAMPLE), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["code"] == 0, report["stderr"]
    reference = tmp_path / "local"
    run_pipeline(
        [str(SAMPLE)], str(reference), __import__("pipelines.default").default.build(), LocalExecutor()
    )
    _same_output(reference, out)
