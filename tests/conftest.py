"""Shared fixtures: small corpora written to tmp folders, and one Ray for the whole session."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent  # the repository
FIXTURE_ROOT = TESTS / "fixtures"  # small real inputs, each folder says where they came from
SAMPLE = ROOT / "dataclean" / "data" / "sample"


@pytest.fixture(scope="session")
def ray_executor() -> Iterator[Any]:
    """A real embedded Ray with 2 workers, started once for the test session."""
    from dataclean.executors.ray import RayExecutor

    executor = RayExecutor(workers=2)
    yield executor
    executor.close()


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    return path


def read_rows(folder: Path) -> list[dict[str, Any]]:
    """All rows of the Parquet files in an output subfolder (empty when it does not exist)."""
    if not folder.exists():
        return []
    return list(ds.dataset(str(folder), format="parquet").to_table().to_pylist())


def sample_web_texts() -> list[str]:
    """The texts of the bundled sample's web documents (real Common Crawl pages, with their dirt:
    lines that are not JSON and non-string texts are passed over, as the reader would exclude them)."""
    texts = []
    for line in (SAMPLE / "web.jsonl").read_bytes().decode("utf-8", errors="replace").splitlines():
        try:
            text = json.loads(line).get("text")
        except json.JSONDecodeError:
            continue
        if isinstance(text, str):
            texts.append(text)
    return texts


# A progress line of `dataclean run` (dataclean.cli.progress): "[  0.3s] starting Ray ...".
PROGRESS_LINE = re.compile(r"^\[ *\d+\.\ds\] ")


def message_lines(output: str) -> list[str]:
    """The lines of a command's output that are not progress lines (nor blank)."""
    return [line for line in output.splitlines() if line.strip() and not PROGRESS_LINE.match(line)]
