"""The classify stage: scores, ranks, buckets and cuts, the same whatever the shards or executor."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from dataclean import columns as C
from dataclean.classify.models import label_probability, load_classifier
from dataclean.classify.ranks import GRID, buckets, combined_ranks, ranks
from dataclean.errors import ConfigError
from dataclean.executors.local import LocalExecutor
from dataclean.run import run_pipeline
from dataclean.run.config import configure
from dataclean.stages.classify import ScoreQuality
from dataclean.stages.language import IdentifyLanguage
from pipelines.default import build
from tests.conftest import read_rows, sample_web_texts, write_jsonl

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TINY = str(FIXTURES / "classify" / "tiny_hs_bigram.ftz")


def _lines(name: str) -> list[str]:
    return [line for line in (FIXTURES / "lm" / name).read_text(encoding="utf-8").splitlines() if line]


def _rows() -> list[dict[str, Any]]:
    """Real English paragraphs, web boilerplate and pages, and Chinese paragraphs (two languages)."""
    texts = [*_lines("wikitext2_test_en.txt"), *_lines("boilerplate_en.txt"), *sample_web_texts()]
    texts += _lines("cmrc2018_heldout_zh.txt")
    return [{"id": f"doc-{i:04d}", "text": text} for i, text in enumerate(texts)]


def _shards(folder: Path, rows: list[dict[str, Any]], count: int) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    return [str(write_jsonl(folder / f"part-{k}.jsonl", rows[k::count])) for k in range(count)]


def _run(
    folder: Path, shards: int, executor: Any, **params: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    stages = [IdentifyLanguage(), ScoreQuality(models=(f"tiny:{TINY}",), label=("hq",), **params)]
    stats = run_pipeline(_shards(folder / "in", _rows(), shards), str(folder / "out"), stages, executor)
    assert stats["totals"]["invariant_holds"]
    return read_rows(folder / "out" / "data"), read_rows(folder / "out" / "excluded")


def test_without_models_the_stage_is_a_no_op() -> None:
    stage = ScoreQuality()
    table = pa.table({C.ID: ["a"], C.TEXT: ["text"]})
    assert stage(table) is table
    assert not stage.is_barrier() and stage.provided_columns() == () and stage.required_columns() == ()
    assert any(isinstance(s, ScoreQuality) for s in build())


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"models": ("nocolon",)}, "NAME:PATH"),
        ({"models": ("x:/no/such/model.bin",)}, "no such model file"),
        ({"models": (f"bad-name:{TINY}",)}, "NAME:PATH"),
        ({"models": (f"a:{TINY}", f"a:{TINY}")}, "given twice"),
        ({"models": (f"a:{TINY}",), "label": ("b=hq",)}, "names no model"),
        ({"models": (f"a:{TINY}",), "keep_top": 1.0}, "keep_top"),
        ({"models": (f"a:{TINY}",), "threshold": ("a=high",)}, "non-number"),
        ({"models": (f"a:{TINY}",), "normalize": "stem"}, "normalize"),
        ({"models": (f"bucket:{TINY}",)}, "quality_bucket"),
    ],
)
def test_settings_are_checked_and_named(params: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ScoreQuality(**params)


def test_exact_is_an_on_off_setting() -> None:
    stage = ScoreQuality(models=(f"a:{TINY}",))
    assert not stage.exact and configure(stage, {"exact": "true"}).exact
    with pytest.raises(ConfigError, match=r"classify\.exact: 'maybe' is not on/off"):
        configure(stage, {"exact": "maybe"})


def test_ranks_buckets_and_the_maximum_rule() -> None:
    cuts = np.arange(1, GRID, dtype=np.float64)  # quantile k/GRID is k: a score s ranks floor(s)
    scores = np.array([0.5, 1.0, 49.9, 50.0, 999.0, 5000.0, np.nan])
    found = ranks(scores, cuts)
    assert found[:6].tolist() == [0, 1, 49, 50, 999, 999] and math.isnan(found[6])
    assert buckets(found).to_pylist() == [0, 0, 0, 1, 19, 19, None]
    langs = np.array(["en", "en", "zh"])
    combined = combined_ranks(
        langs,
        {"a": np.array([10.0, 700.0, 3.0]), "b": np.array([400.0, np.nan, np.nan])},
        {"a": {"en": cuts, "zh": cuts}, "b": {"en": cuts}},
    )
    assert combined.tolist() == [400, 700, 3]


def test_scores_are_the_models_probability_per_language(tmp_path: Path) -> None:
    """NAME@LANG models: each language's rows get its model; others keep a null score."""
    table = pa.table(
        {
            C.ID: ["1", "2", "3"],
            C.TEXT: ["The report was published.", "点击这里", "Hola"],
            C.LANG: ["en", "zh", "es"],
        }
    )
    stage = ScoreQuality(models=(f"q@en:{TINY}", f"q@zh:{TINY}"), label=("lq",), buckets=False, exact=True)
    out = stage(table)
    expected = label_probability(load_classifier(TINY), table.column(C.TEXT).slice(0, 2), "lq")
    assert out.column("quality_q").to_pylist()[:2] == expected.tolist()
    assert out.column("quality_q").to_pylist()[2] is None
    assert not stage.is_barrier()


def test_top_share_and_buckets_are_exact_corpus_percentiles(tmp_path: Path) -> None:
    kept, excluded = _run(tmp_path, 3, LocalExecutor(), keep_top=0.3)
    assert {row[C.REASON] for row in excluded} == {"classify:tiny:below_top"}
    for lang in ("en", "zh"):
        ours = [row for row in kept if row[C.LANG] == lang]
        dropped = [row for row in excluded if row[C.LANG] == lang]
        total = len(ours) + len(dropped)
        # Kept: the rows at or above quantile 0.7 (the value of rank ceil(0.7 n)).
        assert len(ours) >= total - math.ceil(0.7 * total) + 1 - 1e-9
        assert len(ours) <= total * 0.3 + 2
        assert min(row["quality_tiny"] for row in ours) > max(row["quality_tiny"] for row in dropped)
    everything = kept + excluded
    english = [row for row in everything if row[C.LANG] == "en"]
    counts = np.bincount([row[C.QUALITY_BUCKET] for row in english], minlength=20)
    assert counts.sum() == len(english) and counts.max() <= len(english) * 0.05 + 2


def test_annotate_and_threshold(tmp_path: Path) -> None:
    kept, excluded = _run(tmp_path / "annotate", 2, LocalExecutor(), keep_top=0.5, annotate=True)
    assert excluded == [] and all(row["quality_tiny"] is not None for row in kept)
    kept, excluded = _run(tmp_path / "threshold", 2, LocalExecutor(), threshold=("0.5",), buckets=False)
    assert {row[C.REASON] for row in excluded} == {"classify:tiny:below_threshold"}
    assert all(row["quality_tiny"] < 0.5 for row in excluded) and all(
        row["quality_tiny"] >= 0.5 for row in kept
    )
    assert all(C.QUALITY_BUCKET not in row for row in kept)


def _decisions(kept: list[dict[str, Any]], excluded: list[dict[str, Any]]) -> dict[str, tuple[Any, ...]]:
    rows = [*kept, *excluded]
    return {row[C.ID]: (row.get(C.REASON), row[C.QUALITY_BUCKET], row["quality_tiny"]) for row in rows}


def test_cuts_are_the_same_whatever_the_shards_workers_or_executor(tmp_path: Path, ray_executor: Any) -> None:
    one = _decisions(*_run(tmp_path / "one", 1, LocalExecutor(), keep_top=0.2))
    five = _decisions(*_run(tmp_path / "five", 5, LocalExecutor(), keep_top=0.2))
    ray = _decisions(*_run(tmp_path / "ray", 3, ray_executor, keep_top=0.2))
    assert one == five == ray
    assert sum(reason is None for reason, _, _ in one.values()) < len(one) * 0.25


def test_exact_and_projected_scores_cut_the_same_rows(tmp_path: Path) -> None:
    """classify.exact=true (fastText's probabilities bit for bit) and the default projected rows
    (to fastText's float32 rounding) keep, drop and bucket the same rows."""
    exact = _decisions(*_run(tmp_path / "exact", 2, LocalExecutor(), keep_top=0.2, exact=True))
    projected = _decisions(*_run(tmp_path / "projected", 2, LocalExecutor(), keep_top=0.2))
    assert exact.keys() == projected.keys()
    assert all(exact[key][:2] == projected[key][:2] for key in exact)
    assert max(abs(exact[key][2] - projected[key][2]) for key in exact) <= 1e-6


def test_several_models_rank_by_their_maximum(tmp_path: Path) -> None:
    """Two models (the same file, scoring two labels): the bucket is the larger of the two, and
    keep_top keeps the best share of that combined rank."""
    stages = [
        IdentifyLanguage(),
        ScoreQuality(models=(f"a:{TINY}", f"b:{TINY}"), label=("a=hq", "b=lq"), keep_top=0.4),
    ]
    shards = _shards(tmp_path / "in", _rows(), 2)
    run_pipeline(shards, str(tmp_path / "both"), stages, LocalExecutor())
    rows = read_rows(tmp_path / "both" / "data") + read_rows(tmp_path / "both" / "excluded")
    single = {}
    for label in ("hq", "lq"):
        alone = [IdentifyLanguage(), ScoreQuality(models=(f"m:{TINY}",), label=(label,))]
        run_pipeline(shards, str(tmp_path / label), alone, LocalExecutor())
        single[label] = {row[C.ID]: row[C.QUALITY_BUCKET] for row in read_rows(tmp_path / label / "data")}
    for row in rows:
        assert row[C.QUALITY_BUCKET] == max(single["hq"][row[C.ID]], single["lq"][row[C.ID]])
    reasons = {row.get(C.REASON) for row in rows}
    assert reasons == {None, "classify:combined:below_top"}
    english = [row for row in rows if row[C.LANG] == "en"]
    kept = [row for row in english if row.get(C.REASON) is None]
    assert 0.35 * len(english) <= len(kept) <= 0.5 * len(english)
