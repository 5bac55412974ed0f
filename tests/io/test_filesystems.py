"""The default pipeline with input, output and scratch on a pyarrow filesystem given by URI.

`file://` URIs take the same code path as s3://, gs:// and hdfs:// (`pyarrow.fs.FileSystem.from_uri`),
so a run on them must give exactly the rows of a run on plain paths, on the local executor and
on Ray. The S3 test runs against moto's S3 server in this process (moto is in the test extra).
"""

from __future__ import annotations

import logging
import posixpath
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from dataclean import columns as C
from dataclean.dedup.index import build_index
from dataclean.executors.local import LocalExecutor
from dataclean.io import files
from dataclean.io.writers import parquet_files, read_json
from dataclean.quarantine.lists import make_list, write_list
from dataclean.run import run_pipeline
from dataclean.stage import Stage
from dataclean.stages.dedup import DropDuplicates
from dataclean.stages.perplexity import FilterPerplexity
from dataclean.stages.quarantine import DropQuarantined
from pipelines import default
from tests.conftest import SAMPLE

FOLDERS = ("data", "excluded", "quarantined")
LISTED = "zh-0003"  # a sample row the quarantine list drops, so that barrier has work too


def default_stages(quarantine_list: str) -> list[Stage]:
    """`pipelines.default.build()` with a quarantine list, so every barrier runs, and the worst 1%
    of perplexity dropped (the default 0.2% drops nothing from the sample's 478 English rows)."""
    stages: list[Stage] = []
    for stage in default.build():
        if isinstance(stage, DropQuarantined):
            stage = DropQuarantined(path=quarantine_list)
        elif isinstance(stage, FilterPerplexity):
            stage = FilterPerplexity(drop_fraction=0.01)
        stages.append(stage)
    return stages


def output_rows(out: str) -> dict[str, list[dict[str, Any]]]:
    """Every row of an output's folders (any filesystem), sorted by id."""
    rows = {}
    for folder in FOLDERS:
        tables = [files.read_parquet(path) for path in parquet_files(posixpath.join(out, folder))]
        table = pa.concat_tables(tables, promote_options="default") if tables else pa.table({C.ID: []})
        rows[folder] = sorted(table.to_pylist(), key=lambda row: row[C.ID])
    return rows


def run_default(inputs: str, out: str, quarantine_list: str, executor: Any) -> dict[str, Any]:
    stats = run_pipeline([inputs], out, default_stages(quarantine_list), executor)
    assert files.exists(posixpath.join(out, "report.html"))
    assert not files.exists(posixpath.join(out, "_work"))
    assert read_json(posixpath.join(out, "stats.json"))["totals"] == stats["totals"]
    return stats


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """The reference: the sample through the default pipeline, plain local paths, local executor."""
    folder = tmp_path_factory.mktemp("plain")
    write_list(make_list([{"sample_id": LISTED, "reason": "loss_outlier"}]), folder / "q.parquet")
    stats = run_default(str(SAMPLE), str(folder / "out"), str(folder / "q.parquet"), LocalExecutor())
    rows = output_rows(str(folder / "out"))
    assert [row[C.ID] for row in rows["quarantined"]] == [LISTED]
    reasons = {row[C.REASON].split(":")[1] for row in rows["excluded"]}
    assert {"exact_of", "near_duplicate_of", "worst_fraction"} <= reasons  # every barrier decided
    return folder, stats, rows


def _same_as_plain(
    plain: tuple[Path, dict[str, Any], dict[str, Any]], stats: dict[str, Any], out: str
) -> None:
    _, plain_stats, plain_rows = plain
    assert stats["totals"] == plain_stats["totals"]
    assert stats["reasons"] == plain_stats["reasons"]
    assert output_rows(out) == plain_rows


def test_file_uris_give_the_rows_of_plain_paths(
    tmp_path: Path, plain_run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # a URI taken for a relative local path would show up here
    folder = plain_run[0]
    out = f"file://{tmp_path}/out"
    stats = run_default(f"file://{SAMPLE}", out, f"file://{folder}/q.parquet", LocalExecutor())
    _same_as_plain(plain_run, stats, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_file_uris_on_ray_give_the_rows_of_plain_paths(
    tmp_path: Path, plain_run: Any, ray_executor: Any
) -> None:
    folder = plain_run[0]
    out = f"file://{tmp_path}/out"
    stats = run_default(f"file://{SAMPLE}", out, f"file://{folder}/q.parquet", ray_executor)
    _same_as_plain(plain_run, stats, out)


def test_dedup_index_on_a_uri(tmp_path: Path) -> None:
    index = f"file://{tmp_path}/index"
    earlier = pa.table(
        {C.ID: ["old-1"], C.TEXT: ["An earlier document, kept by an earlier run of dataclean."]}
    )
    files.make_dirs(f"file://{tmp_path}/earlier")
    files.write_parquet(f"file://{tmp_path}/earlier/part.parquet", earlier)
    written = build_index(DropDuplicates(), [f"file://{tmp_path}/earlier/part.parquet"], index)
    assert written == [f"{index}/summaries/000000.parquet"]
    new = pa.table({C.ID: ["new-1"], C.TEXT: ["an earlier document, kept by an earlier run of dataclean"]})
    files.write_parquet(f"file://{tmp_path}/new.parquet", new)
    stages = [DropDuplicates(index=index)]
    run_pipeline([f"file://{tmp_path}/new.parquet"], f"file://{tmp_path}/out", stages, LocalExecutor())
    assert [row[C.REASON] for row in output_rows(f"file://{tmp_path}/out")["excluded"]] == [
        "dedup:exact_of:old-1"
    ]


def test_hugging_face_datasets_are_exported_to_a_uri_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    datasets = pytest.importorskip("datasets")
    from dataclean.stages.clean import CleanText

    monkeypatch.chdir(tmp_path)
    dataset = datasets.Dataset.from_dict({C.ID: ["a", "b"], C.TEXT: ["Hello there, world.", "Another line."]})
    out = f"file://{tmp_path}/out"
    stats = run_pipeline([datasets.DatasetDict({"train": dataset})], out, [CleanText()], LocalExecutor())
    assert stats["totals"]["kept"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_file_helpers_round_trip(tmp_path: Path) -> None:
    folder = files.fresh_folder(f"file://{tmp_path}/a/b")
    array = np.arange(12, dtype=np.int64).reshape(6, 2)
    files.save_array(f"{folder}/x.npy", array)
    loaded = files.load_array(f"{folder}/x.npy")
    assert loaded.flags.writeable and np.array_equal(loaded, array)
    with pytest.raises(ValueError), files.atomic_output(f"{folder}/broken.bin") as sink:
        sink.write(b"half")
        raise ValueError("interrupted")
    assert files.list_files(folder) == [f"{folder}/x.npy"]  # no partial file, no hidden temp listed
    assert sorted(p.name for p in (tmp_path / "a" / "b").iterdir()) == ["x.npy"]
    files.fresh_folder(folder)
    assert files.list_files(folder) == []


# --- S3, offline: moto's server in this process -------------------------------------------------


def _complete_multipart_fixed(app: Callable[..., Any]) -> Callable[..., Any]:
    """moto 5.2 answers CompleteMultipartUpload with a `CompleteMultipartUploadResponse` root,
    which the AWS C++ SDK in pyarrow reads as an error embedded in a 200 (S3 says
    `CompleteMultipartUploadResult`): every pyarrow upload then fails. Rename the root."""

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        answer: dict[str, Any] = {}

        def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
            answer["status"], answer["headers"] = status, headers

        body = b"".join(app(environ, capture))
        headers = answer["headers"]
        fixed = body.replace(b"CompleteMultipartUploadResponse", b"CompleteMultipartUploadResult")
        if fixed != body:
            body = fixed
            headers = [(k, str(len(body)) if k.lower() == "content-length" else v) for k, v in headers]
        start_response(answer["status"], headers)
        return [body]

    return wrapped


@pytest.fixture()
def s3_bucket(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An empty bucket on a local moto S3 server; the AWS_* environment points pyarrow at it."""
    # moto[s3,server] is in the test extra: a missing moto fails here rather than skipping the test
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    monkeypatch.setattr(logging.getLogger("werkzeug"), "level", logging.WARNING)  # one line per request
    app = _complete_multipart_fixed(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    endpoint = f"127.0.0.1:{server.server_address[1]}"
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://{endpoint}")  # read by s3:// URIs
    bucket = "dataclean-test"
    pafs.S3FileSystem(endpoint_override=endpoint, scheme="http", allow_bucket_creation=True).create_dir(
        bucket
    )
    try:
        yield bucket
    finally:
        server.shutdown()
        thread.join()


def test_s3_gives_the_rows_of_plain_paths(s3_bucket: str, plain_run: Any) -> None:
    folder = plain_run[0]
    s3, _ = pafs.FileSystem.from_uri(f"s3://{s3_bucket}")
    pafs.copy_files(
        str(SAMPLE), f"{s3_bucket}/in", source_filesystem=pafs.LocalFileSystem(), destination_filesystem=s3
    )
    pafs.copy_files(
        str(folder / "q.parquet"),
        f"{s3_bucket}/q.parquet",
        source_filesystem=pafs.LocalFileSystem(),
        destination_filesystem=s3,
    )
    out = f"s3://{s3_bucket}/out"
    stats = run_default(f"s3://{s3_bucket}/in", out, f"s3://{s3_bucket}/q.parquet", LocalExecutor())
    _same_as_plain(plain_run, stats, out)
    stages = default_stages(f"s3://{s3_bucket}/q.parquet")
    again = run_pipeline([f"s3://{s3_bucket}/in"], out, stages, LocalExecutor())  # finished: a no-op
    assert again["totals"] == stats["totals"]
