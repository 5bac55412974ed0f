"""--set conversion by the stage's field types, and --only/--skip selection."""

from __future__ import annotations

import pytest

from dataclean.errors import ConfigError
from dataclean.run.config import configure, parse_settings, select_stages
from dataclean.stages.clean import CleanText
from dataclean.stages.language import IdentifyLanguage


def test_values_convert_by_field_type() -> None:
    stage = configure(
        CleanText(),
        {
            "fix_mojibake": "off",
            "max_garbage_fraction": "0.5",
            "normalization": "NFC",
        },
    )
    assert isinstance(stage, CleanText)
    assert (stage.fix_mojibake, stage.max_garbage_fraction, stage.normalization) == (False, 0.5, "NFC")
    assert configure(IdentifyLanguage(), {"sample_chars": "200"}).sample_chars == 200  # type: ignore[attr-defined]


def test_literal_choices_are_listed() -> None:
    with pytest.raises(ConfigError, match="not one of none, NFC, NFKC"):
        configure(CleanText(), {"normalization": "NFD"})


def test_parse_settings_rejects_malformed() -> None:
    assert parse_settings(["clean.a=1", "clean.b = x"]) == {"clean": {"a": "1", "b": "x"}}
    with pytest.raises(ConfigError, match=r"STAGE\.PARAM=VALUE"):
        parse_settings(["clean=1"])


def test_select_stages_checks_names() -> None:
    stages = [CleanText()]
    assert select_stages(stages, skip=["clean"]) == []
    with pytest.raises(ConfigError, match=r"stages in this pipeline: clean"):
        select_stages(stages, only=["dedupe"])
