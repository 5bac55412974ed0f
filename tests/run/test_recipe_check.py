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
from dataclean.errors import ConfigError, ExecutorError
from dataclean.quarantine.lists import make_list, write_list
from dataclean.run import check_columns, run_pipeline
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


# The contract's reads that depend on the input, on a parameter, or on an optional column.


def _rows_with_lang() -> list[dict[str, object]]:
    prose = (
        "The committee met on Tuesday to discuss the budget for the coming year, and after a long "
        "debate it agreed to fund the new library, the repairs to the bridge and the school meals. "
    )
    return [
        {"id": f"en{i}", "text": prose * 3 + f"Item {i} was recorded in the minutes.", "lang": "en"}
        for i in range(3)
    ]


def test_an_input_lang_satisfies_quality_and_classify_run_alone(tmp_path: Path) -> None:
    """`--only quality` and `--only classify` on an input with its own `lang` column run: the plan
    reads the input's first record, and the input's column serves as the language stage's would."""
    inp = write_jsonl(tmp_path / "in.jsonl", _rows_with_lang())
    model = ROOT / "tests" / "fixtures" / "classify" / "tiny_hs_bigram.ftz"
    runs = {
        "quality": ("--only", "quality"),
        "classify": (
            "--only",
            "classify",
            "--set",
            f"classify.models=tiny:{model}",
            "--set",
            "classify.label=hq",
        ),
    }
    for name, args in runs.items():
        out = tmp_path / name
        result = _cli(str(inp), "-o", str(out), "--executor", "local", *args)
        assert result.returncode == 0, result.stderr[-3000:]
        stats = json.loads((out / "stats.json").read_text())
        assert stats["totals"]["rows_in"] == 3
        assert [stage["stage"] for stage in stats["stages"] if stage["stage"] != "read"] == [name]
    kept = pq.read_table(tmp_path / "classify" / "data").to_pylist()
    assert {row["lang"] for row in kept} == {"en"} and all(0.0 <= row["quality_tiny"] <= 1.0 for row in kept)


def test_a_keep_column_the_run_lacks_fails_when_planned_in_one_line(tmp_path: Path) -> None:
    inp = write_jsonl(tmp_path / "in.jsonl", _rows_with_lang())
    out = tmp_path / "out"
    result = _cli(
        str(inp), "-o", str(out), "--executor", "local", "--only", "dedup", "--set", "dedup.keep=-score"
    )
    assert result.returncode == 2, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == ["error: stage 'dedup' needs column 'score', which no stage before it provides"]
    assert not out.exists()
    # With the column in the input, the same setting plans and runs.
    rows = [{**row, "score": float(i)} for i, row in enumerate(_rows_with_lang())]
    given = write_jsonl(tmp_path / "given.jsonl", rows)
    result = _cli(
        str(given), "-o", str(out), "--executor", "local", "--only", "dedup", "--set", "dedup.keep=-score"
    )
    assert result.returncode == 0, result.stderr[-3000:]


def test_an_optional_read_provided_only_later_is_refused() -> None:
    with pytest.raises(ConfigError) as raised:
        check_columns([DropDuplicates(), IdentifyLanguage()])
    assert str(raised.value) == (
        "stage 'dedup' reads column 'lang' when present, but stage 'language' provides it only after it: "
        "put that stage first"
    )
    check_columns([DropDuplicates(), IdentifyLanguage()], given=[C.LANG])  # the input's lang serves


def test_the_final_step_is_the_one_producer_of_text_hash() -> None:
    @dataclass
    class Hashes(Stage):
        name: ClassVar[str] = "hashes"
        provides: ClassVar[tuple[str, ...]] = (C.TEXT_HASH,)

        def __call__(self, table: pa.Table) -> pa.Table:
            return table

    with pytest.raises(ConfigError, match="provides column 'text_hash', which the final step provides"):
        check_columns([Hashes()])


def test_an_object_that_is_not_an_executor_is_refused_naming_what_it_lacks(tmp_path: Path) -> None:
    class Half:
        workers = 2

        def map(self, fn: object, items: list[object]) -> list[object]:
            return []

    inp = write_jsonl(tmp_path / "in.jsonl", _rows_with_lang())
    with pytest.raises(ExecutorError) as raised:
        run_pipeline([str(inp)], str(tmp_path / "out"), [CleanText()], Half())  # type: ignore[arg-type]
    assert str(raised.value) == (
        "Half is not an executor: it lacks remote_workers, starting, map_queue, nodes, on_node, close; "
        "subclass dataclean.executors.base.Executor, which declares every capability a run uses"
    )
    assert not (tmp_path / "out").exists()
