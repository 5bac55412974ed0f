"""Stages `perplexity` and `perplexity_filter`: scoring, one model load per worker, thresholds
computed across shards, buckets at corpus percentiles, and whole runs."""

from __future__ import annotations

import json
import math
import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataclean import columns as C
from dataclean.errors import ConfigError
from dataclean.executors.local import LocalExecutor
from dataclean.io.readers import ReadOptions
from dataclean.lm.quantiles import exact_quantiles
from dataclean.run import run_pipeline
from dataclean.run.config import configure
from dataclean.stage import FitContext
from dataclean.stages import perplexity as P
from dataclean.stages.language import IdentifyLanguage
from dataclean.stages.perplexity import FilterPerplexity, ScorePerplexity
from tests.conftest import FIXTURE_ROOT, read_rows, write_jsonl

EN = "The committee published its annual report on the state of the river in the spring."
ZH = "长江是中国第一长河，全长约六千三百公里，流经青海、西藏、四川、云南等省区。"
RU = "Это обычное предложение на русском языке, и для него нет модели."


def test_score_adds_ppl_and_picks_the_model_by_lang() -> None:
    table = pa.table({C.ID: ["a", "b", "c", "d", "e"], C.TEXT: [EN, ZH, RU, "Hi.", None]})
    table = IdentifyLanguage()(table).drop_columns([C.DROP_REASON])
    out = ScorePerplexity()(table)
    assert out.column(C.LANG).to_pylist()[:3] == ["en", "zh", "ru"]  # the language stage's
    ppl = out.column(C.PPL)
    assert ppl.type == pa.float64()
    values = ppl.to_pylist()
    assert values[0] > 1 and values[1] > 1
    assert values[2:] == [None, None, None]  # no model; too short; null text
    # The Chinese text is scored by the Chinese model, not the English one.
    zh_only = ScorePerplexity(models=("en=off",))(table.slice(1, 1))
    assert zh_only.column(C.PPL).to_pylist() == [values[1]]


def test_existing_scores_are_kept_unless_rescore() -> None:
    table = pa.table({C.ID: ["a", "b"], C.TEXT: [EN, EN], C.LANG: ["en", "en"], C.PPL: [7.0, None]})
    kept = ScorePerplexity()(table).column(C.PPL).to_pylist()
    assert kept[0] == 7.0 and kept[1] > 7.0
    rescored = ScorePerplexity(rescore=True)(table).column(C.PPL).to_pylist()
    assert rescored[0] == rescored[1] == kept[1]


def test_parameters_are_validated_and_settable() -> None:
    with pytest.raises(ConfigError, match="min_tokens"):
        ScorePerplexity(min_tokens=0)
    with pytest.raises(ConfigError, match="neither a bundled model"):
        ScorePerplexity(models=("en=/no/such/folder",))
    with pytest.raises(ConfigError, match="drop_fraction"):
        FilterPerplexity(drop_fraction=1.5)
    with pytest.raises(ConfigError, match="max_ppl"):
        FilterPerplexity(max_ppl=("en=lots",))
    stage = configure(FilterPerplexity(), {"max_ppl": "en=900,2000", "drop_fraction": "0.01"})
    assert isinstance(stage, FilterPerplexity)
    assert stage.max_by_lang() == {"en": 900.0, None: 2000.0} and stage.drop_fraction == 0.01
    # Models given add to the bundled ones, replace one, or turn one off.
    scorer = configure(ScorePerplexity(), {"models": "en=off", "min_tokens": "3"})
    assert isinstance(scorer, ScorePerplexity) and scorer.model_specs() == {"zh": "zh"}


def test_models_given_add_to_the_bundled_ones(tmp_path: Path) -> None:
    added = ScorePerplexity(models=(f"de:{tmp_path}",)).model_specs()
    assert added == {"en": "en", "zh": "zh", "de": str(tmp_path)}
    replaced = ScorePerplexity(models=(f"en={tmp_path}", "zh=off")).model_specs()
    assert replaced == {"en": str(tmp_path)}


def test_models_load_once_per_worker_never_per_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    loads: list[str] = []
    real = P.load_model

    def counting(spec: Any) -> Any:
        loads.append(str(spec))
        return real(spec)

    monkeypatch.setattr(P, "load_model", counting)
    shards = [write_jsonl(tmp_path / f"s{i}.jsonl", [{"text": EN}, {"text": ZH}] * 5) for i in range(3)]
    # 3 shards x 5 batches of 2 rows on one worker: still one load per model.
    run_pipeline(
        [str(s) for s in shards],
        str(tmp_path / "out"),
        [IdentifyLanguage(), ScorePerplexity()],
        LocalExecutor(),
        ReadOptions(batch_rows=2),
    )
    assert sorted(loads) == ["en", "zh"]
    # A stage shipped to a worker carries no model: the worker loads it in setup().
    stage = ScorePerplexity()
    stage.setup()
    assert pickle.loads(pickle.dumps(stage))._loaded is None


def _summaries(tmp_path: Path, shards: list[dict[str, list[Any]]]) -> list[str]:
    stage = FilterPerplexity()
    paths = []
    for index, columns in enumerate(shards):
        summary = stage.observe(pa.table(columns))
        assert summary is not None
        path = tmp_path / f"summary-{index}.parquet"
        pq.write_table(summary, path)
        paths.append(str(path))
    return paths


def test_drop_fraction_is_computed_across_shards_per_language(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    # Shard 0 holds only low English perplexities, shard 2 the high ones: a per-shard cut
    # would drop rows from every shard; the corpus-wide cut drops only from shard 2.
    en = np.sort(rng.lognormal(5, 1, 3000))
    zh = rng.lognormal(7, 0.5, 1000)
    shards = [
        {C.LANG: ["en"] * 1000 + ["zh"] * 500, C.PPL: [*en[:1000], *zh[:500]]},
        {C.LANG: ["en"] * 1000 + ["zh"] * 500, C.PPL: [*en[1000:2000], *zh[500:]]},
        {C.LANG: ["en"] * 1000 + ["xx"] * 2, C.PPL: [*en[2000:], None, 5.0]},
    ]
    stage = FilterPerplexity(drop_fraction=0.01)
    stage.fit(FitContext(_summaries(tmp_path, shards), str(tmp_path / "scratch"), LocalExecutor()))
    pickle.loads(pickle.dumps(stage))  # the fitted state ships to workers: small and picklable
    dropped = {"en": 0, "zh": 0}
    for index, columns in enumerate(shards):
        out = stage(pa.table(columns))
        reasons = out.column(C.DROP_REASON).to_pylist()
        langs = columns[C.LANG]
        for lang, reason in zip(langs, reasons, strict=True):
            if reason:
                assert reason == "worst_fraction"
                dropped[lang] += 1
        if index < 2:
            assert not any(r for lang, r in zip(langs, reasons, strict=True) if lang == "en")
    assert dropped == {"en": 30, "zh": 10}  # floor(1% of 3000), floor(1% of 1000)
    assert stage.worst_above["en"] == pytest.approx(np.quantile(en, 0.99, method="inverted_cdf"))


def test_buckets_at_corpus_percentiles_and_absolute_maximum(tmp_path: Path) -> None:
    values = [float(v) for v in range(1, 101)]
    shards = [
        {C.LANG: ["en"] * 50, C.PPL: values[:50]},
        {C.LANG: ["en"] * 50 + ["zh", "zh"], C.PPL: [*values[50:], 10.0, None]},
    ]
    stage = FilterPerplexity(max_ppl=("en=95", "1000"))
    stage.fit(FitContext(_summaries(tmp_path, shards), str(tmp_path), LocalExecutor()))
    assert stage.cutoffs["en"] == [30.0, 60.0]
    out = stage(pa.table(shards[1]))
    buckets = out.column(C.PPL_BUCKET).to_pylist()
    assert buckets[:10] == ["middle"] * 10 and buckets[10:50] == ["tail"] * 40
    assert buckets[50:] == ["head", None]  # a lone zh row is its own corpus; null ppl, no bucket
    first = stage(pa.table(shards[0])).column(C.PPL_BUCKET).to_pylist()
    assert first.count("head") == 30 and first.count("middle") == 20
    reasons = out.column(C.DROP_REASON).to_pylist()
    assert reasons[45:50] == ["too_perplexing"] * 5 and not any(reasons[:45]) and not any(reasons[50:])


def test_exact_quantiles_match_numpy(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    values = np.concatenate([rng.normal(0, 100, 5000), np.full(300, 3.0), [-np.inf, np.inf]])
    rng.shuffle(values)
    paths = []
    for index, part in enumerate(np.array_split(values, 4)):
        path = tmp_path / f"{index}.parquet"
        pq.write_table(pa.table({"k": ["a"] * len(part), "v": part}), path)
        paths.append(str(path))
    quantiles = [0.0001, 0.3, 0.5, 0.6, 0.998, 1.0]
    expected = [np.quantile(values, q, method="inverted_cdf") for q in quantiles]
    assert exact_quantiles(paths, "k", "v", quantiles)["a"] == expected
    # The same passes as maps over the files on an executor (the perplexity_filter fit's way).
    assert exact_quantiles(paths, "k", "v", quantiles, LocalExecutor())["a"] == expected


def test_whole_run_scores_buckets_and_drops_with_prefixed_reasons(tmp_path: Path) -> None:
    # Word salad: English to lid.176 (so the English model judges it), perplexing to that model.
    # (Consonant strings such as "qzx vbnm" are Welsh to lid.176 and get no English ppl.)
    garbage = "spring report the river annual of state published committee its the on in " * 2
    rows = [{"id": f"en-{i}", "text": f"{EN} Item number {i} is listed here."} for i in range(30)]
    rows += [{"id": f"zh-{i}", "text": ZH * (1 + i % 3)} for i in range(20)]
    shards = [
        write_jsonl(tmp_path / "a.jsonl", rows[:25]),
        write_jsonl(tmp_path / "b.jsonl", [*rows[25:], {"id": "bad", "text": garbage}]),
    ]
    stages = [
        IdentifyLanguage(),
        ScorePerplexity(),
        FilterPerplexity(max_ppl=("en=5000",), drop_fraction=0.04),
    ]
    stats = run_pipeline([str(s) for s in shards], str(tmp_path / "out"), stages, LocalExecutor())
    assert stats["totals"]["invariant_holds"]
    kept = read_rows(tmp_path / "out" / "data")
    excluded = read_rows(tmp_path / "out" / "excluded")
    assert {row[C.REASON] for row in excluded} <= {
        "perplexity_filter:worst_fraction",
        "perplexity_filter:too_perplexing",
    }
    assert "bad" in {row[C.ID] for row in excluded}
    assert len(kept) + len(excluded) == len(rows) + 1
    assert all(row[C.PPL_BUCKET] in ("head", "middle", "tail") for row in kept)
    assert all(not math.isnan(row[C.PPL]) for row in kept)


class _CountingScore(ScorePerplexity):
    """Records each model load (process id) in a file, so loads in Ray workers can be counted."""

    log: str = ""

    def setup(self) -> None:
        if self._loaded is None:
            with open(self.log, "a") as out:
                out.write(f"{os.getpid()}\n")
        super().setup()


def test_one_load_per_ray_worker(tmp_path: Path, ray_executor: Any) -> None:
    shards = [write_jsonl(tmp_path / f"s{i}.jsonl", [{"text": EN}] * 4) for i in range(6)]
    stage = _CountingScore()
    stage.log = str(tmp_path / "loads.txt")
    run_pipeline(
        [str(s) for s in shards],
        str(tmp_path / "out"),
        [IdentifyLanguage(), stage],
        ray_executor,
        ReadOptions(batch_rows=2),
    )
    pids = (tmp_path / "loads.txt").read_text().split()
    assert len(pids) == len(set(pids)) <= ray_executor.workers < len(shards)


def test_run_cli_options_for_model_and_thresholds(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from dataclean.cli import cli

    inp = write_jsonl(tmp_path / "in.jsonl", [{"text": EN}, {"text": ZH}, {"text": "Hi."}])
    # without the quality stage, whose web-page rules drop these three short texts
    args = ["run", str(inp), "-o", str(tmp_path / "o"), "--executor", "local", "--quiet", "--skip", "quality"]
    result = CliRunner().invoke(cli, [*args, "--lm", "zh=off", "--max-ppl", "en=1.5"])
    assert result.exit_code == 0, result.output
    kept = {row[C.TEXT]: row for row in read_rows(tmp_path / "o" / "data")}
    excluded = read_rows(tmp_path / "o" / "excluded")
    assert [row[C.REASON] for row in excluded] == ["perplexity_filter:too_perplexing"]
    assert kept[ZH][C.PPL] is None and kept["Hi."][C.PPL] is None  # no zh model; too short
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text())
    params = {stage["stage"]: stage["params"] for stage in manifest["config"]["stages"]}
    assert params["perplexity"]["models"] == ["zh=off"]
    assert params["perplexity_filter"]["max_ppl"] == ["en=1.5"]
    bad = CliRunner().invoke(cli, [*args[:3], str(tmp_path / "p"), *args[4:], "--drop-ppl-fraction", "2"])
    assert bad.exit_code == 2 and "drop_fraction" in bad.output


def test_thresholds_retune_on_a_previous_output_without_rescoring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fixture = FIXTURE_ROOT / "lm" / "wikitext2_test_en.txt"
    paragraphs = fixture.read_text(encoding="utf-8").splitlines()[:40]
    rows = [{"id": f"d{i}", "text": text} for i, text in enumerate(paragraphs)]
    inp = write_jsonl(tmp_path / "in.jsonl", rows)
    run_pipeline(
        [str(inp)],
        str(tmp_path / "first"),
        [IdentifyLanguage(), ScorePerplexity(), FilterPerplexity()],
        LocalExecutor(),
    )
    first = {row[C.ID]: row[C.PPL] for row in read_rows(tmp_path / "first" / "data")}
    assert len(first) == 40

    def no_loading(spec: Any) -> Any:
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(P, "load_model", no_loading)
    stats = run_pipeline(
        [str(tmp_path / "first" / "data")],
        str(tmp_path / "second"),
        [FilterPerplexity(drop_fraction=0.1)],
        LocalExecutor(),
    )
    excluded = read_rows(tmp_path / "second" / "excluded")
    assert len(excluded) == 4 and stats["totals"]["invariant_holds"]
    worst = sorted(first, key=lambda i: first[i])[-4:]
    assert sorted(row[C.ID] for row in excluded) == sorted(worst)
