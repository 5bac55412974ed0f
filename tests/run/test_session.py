"""The run lifecycle (`dataclean.session.Session`): stages loaded while the executor starts, the
report written while it closes, and everything closed when something fails."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pyarrow as pa
import pytest

from dataclean import columns as C
from dataclean.errors import ConfigError
from dataclean.session import Session
from dataclean.stage import Stage
from dataclean.stages.clean import CleanText
from dataclean.stages.language import IdentifyLanguage
from tests.conftest import read_rows, write_jsonl


def test_a_session_runs_and_writes_the_report_on_leaving(tmp_path: Path) -> None:
    inp = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": "Plain words."}, {"id": "b", "text": ""}])
    out = tmp_path / "out"
    with Session(lambda: [CleanText(), IdentifyLanguage()], "local") as session:
        assert [stage.name for stage in session.stages] == ["clean", "language"]
        stats = session.run([str(inp)], str(out))
        assert not (out / "report.html").exists()  # written on leaving, while the executor closes
    assert (out / "report.html").exists() and session.executor is None
    assert stats["totals"]["kept"] == 1 and [row["id"] for row in read_rows(out / "data")] == ["a"]


def test_a_recipe_that_fails_to_load_closes_the_session(tmp_path: Path) -> None:
    def broken() -> list[Stage]:
        raise ConfigError("clean.nonsense: no such parameter")

    session = Session(broken, "local")
    with pytest.raises(ConfigError, match="nonsense"), session:
        pass
    assert session.executor is None


def test_a_failed_run_writes_no_report(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match="needs column 'lang'"), Session([_NeedsLang()], "local") as session:
        session.run([str(write_jsonl(tmp_path / "in.jsonl", [{"text": "x"}]))], str(out))
    assert not (out / "report.html").exists()


class _NeedsLang(Stage):
    """A stage reading `lang` with no producer of it before it: the run fails at planning."""

    name: ClassVar[str] = "needs_lang"
    requires: ClassVar[tuple[str, ...]] = (C.LANG,)

    def __call__(self, table: pa.Table) -> pa.Table:
        return table
