"""Planning checks the whole recipe's columns before any shard is read, on every executor; the CLI's
shorthand options find their stage by type, whatever the recipe calls it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataclean import columns as C
from dataclean.errors import ConfigError
from dataclean.quarantine.lists import make_list, write_list
from dataclean.run import check_columns
from dataclean.stage import Stage
from dataclean.stages.clean import CleanText
from dataclean.stages.dedup import DropDuplicates
from dataclean.stages.language import IdentifyLanguage
from dataclean.stages.perplexity import FilterPerplexity, ScorePerplexity
from dataclean.stages.quarantine import DropQuarantined
from dataclean.stages.split import SplitLongDocuments
from tests.conftest import ROOT, write_jsonl


def test_perplexity_without_language_fails_in_one_line_naming_stage_and_column() -> None:
    with pytest.raises(ConfigError) as raised:
        check_columns([CleanText(), ScorePerplexity(), FilterPerplexity()])
    message = str(raised.value)
    assert message == (
        "stage 'perplexity' needs column 'lang', which no stage before it provides "
        "(add the language stage before it)"
    )
    with pytest.raises(ConfigError, match="'perplexity_filter' needs column 'ppl'"):
        check_columns([CleanText(), IdentifyLanguage(), FilterPerplexity()])


def test_a_producer_after_its_consumer_is_not_enough() -> None:
    with pytest.raises(ConfigError, match="'perplexity' needs column 'lang'"):
        check_columns([ScorePerplexity(), IdentifyLanguage()])


@dataclass
class SecondLanguage(Stage):
    """Another stage providing `lang`: a recipe may not have two producers of one column."""

    name: ClassVar[str] = "second_language"
    provides: ClassVar[tuple[str, ...]] = (C.LANG,)

    def __call__(self, table: pa.Table) -> pa.Table:
        return table


def test_a_column_has_exactly_one_producer() -> None:
    with pytest.raises(ConfigError) as raised:
        check_columns([IdentifyLanguage(), SecondLanguage()])
    assert str(raised.value) == (
        "stage 'second_language' provides column 'lang', which stage 'language' provides already: "
        "a column has one producer"
    )


def test_every_stage_of_today_declares_its_columns_and_the_recipe_checks() -> None:
    stages = [
        CleanText(),
        IdentifyLanguage(),
        DropDuplicates(),
        SplitLongDocuments(),
        ScorePerplexity(),
        FilterPerplexity(),
        DropQuarantined(),
    ]
    check_columns(stages)
    provided = {column: stage.name for stage in stages for column in stage.provided_columns()}
    assert provided == {
        C.REMOVED_CHARS: "clean",
        C.LANG: "language",
        C.LANG_SCORE: "language",
        C.DUP_CLUSTER: "dedup",
        C.DUP_SCORE: "dedup",
        C.PPL: "perplexity",
        C.PPL_BUCKET: "perplexity_filter",
        C.WEIGHT: "quarantine",
    }


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "dataclean", "run", *args, "--quiet"]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)


@pytest.mark.parametrize("executor", ["local", "ray"])
def test_a_missing_producer_fails_before_any_shard_is_read_on_every_executor(
    tmp_path: Path, executor: str
) -> None:
    inp = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": "Some ordinary words in a row."}])
    out = tmp_path / "out"
    result = _cli(str(inp), "-o", str(out), "--executor", executor, "--skip", "language")
    assert result.returncode == 2, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr[-3000:]
    # The first stage of the default recipe that reads `lang` (quality, or perplexity without it).
    assert re.fullmatch(
        r"error: stage '\w+' needs column 'lang', which no stage before it provides "
        r"\(add the language stage before it\)",
        lines[0],
    ), lines[0]
    assert not out.exists()  # nothing written, nothing read


RECIPE = """
from dataclean.stages.clean import CleanText
from dataclean.stages.quarantine import DropQuarantined
from dataclean.stages.split import SplitLongDocuments


class Blocklist(DropQuarantined):
    name = "blocklist"


STAGES = [CleanText(), Blocklist(), SplitLongDocuments()]
"""


def test_quarantine_and_max_chars_reach_stages_a_recipe_names_otherwise(
    tmp_path: Path,
) -> None:
    recipe = tmp_path / "my_recipe.py"
    recipe.write_text(RECIPE)
    words = ["river", "mountain", "harbour", "orchard"]
    rows = [
        {"id": f"d{i}", "text": f"The {word} is quiet in the early morning light. " * 6}
        for i, word in enumerate(words)
    ]
    inp = write_jsonl(tmp_path / "in.jsonl", rows)
    write_list(make_list([{"sample_id": "d2", "reason": "loss_outlier"}]), tmp_path / "q.parquet")
    out = tmp_path / "out"
    args = ["--pipeline", str(recipe), "--executor", "local", "--max-chars", "150"]
    result = _cli(str(inp), "-o", str(out), *args, "--quarantine", str(tmp_path / "q.parquet"))
    assert result.returncode == 0, result.stderr[-3000:]
    quarantined = pq.read_table(out / "quarantined").to_pylist()
    assert {row["parent_id"] for row in quarantined} == {"d2"}
    assert {row["reason"] for row in quarantined} == {"blocklist:loss_outlier"}
    kept = pq.read_table(out / "data").to_pylist()
    assert {row["parent_id"] for row in kept} == {"d0", "d1", "d3"}
    assert max(len(row["text"]) for row in kept) <= 150  # --max-chars reached the split stage
    manifest = json.loads((out / "manifest.json").read_text())
    assert [entry["stage"] for entry in manifest["config"]["stages"]] == ["clean", "blocklist", "split"]


def test_an_option_whose_stage_is_not_in_the_recipe_says_so(tmp_path: Path) -> None:
    recipe = tmp_path / "no_quarantine.py"
    recipe.write_text("from dataclean.stages.clean import CleanText\nSTAGES = [CleanText()]\n")
    inp = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": "Words."}])
    result = _cli(
        str(inp),
        "-o",
        str(tmp_path / "out"),
        "--pipeline",
        str(recipe),
        "--executor",
        "local",
        "--quarantine",
        str(tmp_path / "q.parquet"),
    )
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.strip() == (
        "error: --quarantine: needs one quarantine stage (DropQuarantined) in the recipe, found none"
    )
