"""The dedup stage end to end: observe on shards, fit on an executor, apply; params; index."""

from __future__ import annotations

import pickle
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataclean import columns as C
from dataclean.dedup.decisions import Decisions
from dataclean.dedup.index import build_index
from dataclean.dedup.reduce import PARTITION_BYTES, _partitions
from dataclean.errors import ConfigError
from dataclean.executors.local import LocalExecutor
from dataclean.run.config import configure
from dataclean.stage import FitContext
from dataclean.stages.dedup import DropDuplicates
from tests.conftest import FIXTURE_ROOT

ROOT = Path(__file__).resolve().parents[2]

FIXTURES = FIXTURE_ROOT / "dedup"
ENGLISH = (FIXTURES / "en_paragraphs.txt").read_text(encoding="utf-8").splitlines()
CHINESE = (FIXTURES / "zh_paragraphs.txt").read_text(encoding="utf-8").splitlines()


def edit_words(text: str, rate: float, rng: random.Random) -> str:
    """Replace about `rate` of the words with new ones."""
    words = text.split()
    for _ in range(max(1, round(len(words) * rate))):
        words[rng.randrange(len(words))] = f"edit{rng.randrange(10**6)}"
    return " ".join(words)


def corpus() -> pa.Table:
    """English originals, near copies (2% of words edited), exact copies (other case/spacing)."""
    rng = random.Random(5)
    ids, texts = [], []
    for number, text in enumerate(ENGLISH[:60]):
        ids.append(f"a{number:03d}")
        texts.append(text)
        if number % 3 == 0:
            ids.append(f"n{number:03d}")
            texts.append(edit_words(text, 0.02, rng))
        if number % 5 == 0:
            ids.append(f"x{number:03d}")
            texts.append("  " + text.upper().replace(" ", "   ") + " ")
    order = list(range(len(ids)))
    rng.shuffle(order)
    return pa.table({C.ID: [ids[i] for i in order], C.TEXT: [texts[i] for i in order]})


def run(
    stage: DropDuplicates,
    table: pa.Table,
    tmp_path: Path,
    shards: int = 1,
    executor: Any = None,
    by_shard: bool = False,
) -> pa.Table:
    """observe per shard -> fit -> apply per shard, as the runner does; returns all rows.
    `by_shard`: fit knows each summary's shard and applying begins each shard, as in a run."""
    bounds = [table.num_rows * s // shards for s in range(shards + 1)]
    pieces = [table.slice(bounds[s], bounds[s + 1] - bounds[s]) for s in range(shards)]
    folder = tmp_path / f"run-{shards}-{id(executor)}-{by_shard}"
    folder.mkdir()
    summaries = []
    for number, piece in enumerate(pieces):
        path = str(folder / f"summary-{number}.parquet")
        pq.write_table(stage.observe(piece), path)
        summaries.append(path)
    shard_indices = list(range(shards)) if by_shard else None
    stage.fit(FitContext(summaries, str(folder / "scratch"), executor or LocalExecutor(), shard_indices))
    fitted = pickle.loads(pickle.dumps(stage))  # as shipped to workers
    applied = []
    for number, piece in enumerate(pieces):
        if by_shard:
            fitted.begin_shard(number)
        applied.append(fitted(piece))
    return pa.concat_tables(applied).sort_by(C.ID)


def decisions(table: pa.Table) -> dict[str, tuple[str | None, str | None]]:
    """id -> (drop reason, dup_cluster)."""
    return {
        row[C.ID]: (row[C.DROP_REASON], row[C.DUP_CLUSTER])
        for row in table.select([C.ID, C.DROP_REASON, C.DUP_CLUSTER]).to_pylist()
    }


def test_exact_and_near_duplicates_are_dropped(tmp_path: Path) -> None:
    result = decisions(run(DropDuplicates(), corpus(), tmp_path))
    assert result["x000"] == ("exact_of:a000", "a000")
    assert result["n003"] == ("near_duplicate_of:a003", "a003")
    assert result["a003"] == (None, "a003")
    assert result["a001"] == (None, None)
    near = [key for key in result if key.startswith("n")]
    assert all(result[key][0] == f"near_duplicate_of:a{key[1:]}" for key in near)
    assert sum(1 for reason, _ in result.values() if reason) == 20 + 12


def test_scores_are_verified_jaccard(tmp_path: Path) -> None:
    table = run(DropDuplicates(), corpus(), tmp_path)
    rows = {row[C.ID]: row for row in table.to_pylist()}
    assert rows["x000"][C.DUP_SCORE] == 1.0
    assert 0.7 <= rows["n003"][C.DUP_SCORE] < 1.0
    assert rows["a003"][C.DUP_SCORE] is None


def test_same_result_with_one_or_four_shards(tmp_path: Path) -> None:
    table = corpus()
    one = decisions(run(DropDuplicates(), table, tmp_path, shards=1))
    four = decisions(run(DropDuplicates(), table, tmp_path, shards=4))
    assert one == four


def test_same_result_whatever_the_shuffles_map_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shuffle's map tasks take groups of summary files (`reduce.map_groups`): one file a
    group or all in one, the same decisions; the groups cover every file once, in order."""
    from dataclean.dedup import reduce

    table = corpus()
    (tmp_path / "together").mkdir()
    (tmp_path / "apart").mkdir()
    together = decisions(run(DropDuplicates(), table, tmp_path / "together", shards=5))
    monkeypatch.setattr(reduce, "MAP_BYTES", 1)
    apart = decisions(run(DropDuplicates(), table, tmp_path / "apart", shards=5))
    assert together == apart and sum(1 for reason, _ in apart.values() if reason) == 32
    summaries = sorted(str(path) for path in (tmp_path / "apart").glob("run-5-*/summary-*.parquet"))
    files, footers = reduce.source_files(summaries)
    for budget, sizes in ((1, [1] * 5), (1 << 30, [5])):
        groups = reduce.map_groups(files, footers, budget)
        assert [len(group) for group in groups] == sizes
        assert [source.index for group in groups for source in group] == list(range(5))


def test_exact_duplicates_across_shards_keep_the_smallest_id(tmp_path: Path) -> None:
    table = pa.table(
        {
            C.ID: ["b", "x", "a", "c"],
            C.TEXT: ["Same text here.", "Other text entirely", "same TEXT, here", "SAME text here"],
        }
    )
    result = decisions(run(DropDuplicates(near=False), table, tmp_path, shards=4))
    assert result == {
        "a": (None, "a"),
        "b": ("exact_of:a", "a"),
        "c": ("exact_of:a", "a"),
        "x": (None, None),
    }


def test_chinese_near_duplicates_by_character_shingles(tmp_path: Path) -> None:
    rng = random.Random(2)
    ids: list[str] = []
    texts: list[str] = []
    langs: list[str | None] = []
    for number, text in enumerate(CHINESE[:20]):
        ids.append(f"zh-{number:02d}")
        texts.append(text)
        langs.append("zh")
        chars = list(text)
        for _ in range(max(1, len(chars) // 100)):  # about 1% of characters replaced
            chars[rng.randrange(len(chars))] = "字"
        ids.append(f"zh-{number:02d}-copy")
        texts.append("".join(chars))
        langs.append(None)  # detected by script
    table = pa.table({C.ID: ids, C.TEXT: texts, C.LANG: langs})
    result = decisions(run(DropDuplicates(), table, tmp_path, shards=2))
    for number in range(20):
        assert result[f"zh-{number:02d}-copy"][0] == f"near_duplicate_of:zh-{number:02d}"


def test_short_and_empty_texts(tmp_path: Path) -> None:
    table = pa.table(
        {
            C.ID: ["e1", "e2", "e3", "s1", "s2", "s3", "s4"],
            C.TEXT: ["", "   ", "?!", "Thank you.", "thank you", "Thank you very much", "Yes"],
        }
    )
    result = decisions(run(DropDuplicates(), table, tmp_path))
    # Empty after normalization: never duplicates. Short: the whole text is one shingle, so only
    # texts with the same normalized form match, and different short texts never merge.
    assert result == {
        "e1": (None, None),
        "e2": (None, None),
        "e3": (None, None),
        "s1": (None, "s1"),
        "s2": ("exact_of:s1", "s1"),
        "s3": (None, None),
        "s4": (None, None),
    }


def test_keep_rules(tmp_path: Path) -> None:
    text = ENGLISH[0]
    table = pa.table(
        {
            C.ID: ["a", "b", "c"],
            C.TEXT: [text, text + " And one more sentence at the end.", text.upper()],
            C.PPL: [30.0, 10.0, None],
        }
    )
    longest = decisions(run(DropDuplicates(keep="longest"), table, tmp_path, shards=3))
    assert longest["b"] == (None, "b")
    assert longest["a"][0] is not None and longest["a"][0].endswith(":b")
    lowest = decisions(run(DropDuplicates(keep="ppl"), table, tmp_path, shards=2))
    assert lowest["b"] == (None, "b")
    highest = decisions(run(DropDuplicates(keep="-ppl"), table, tmp_path))
    assert highest["a"] == (None, "a")
    assert highest["c"] == ("exact_of:a", "a")  # null score loses
    with pytest.raises(ConfigError, match=r"dedup\.keep"):
        DropDuplicates(keep="missing_column").observe(table)


def test_estimated_similarity_without_verification(tmp_path: Path) -> None:
    result = run(DropDuplicates(verify=False), corpus(), tmp_path)
    rows = {row[C.ID]: row for row in result.to_pylist()}
    assert rows["n003"][C.DROP_REASON] == "near_duplicate_of:a003"
    assert 0.7 <= rows["n003"][C.DUP_SCORE] <= 1.0


def test_near_only_reports_exact_copies_as_near(tmp_path: Path) -> None:
    result = decisions(run(DropDuplicates(exact=False), corpus(), tmp_path))
    assert result["x000"] == ("near_duplicate_of:a000", "a000")


def test_fitted_stage_is_small_when_pickled(tmp_path: Path) -> None:
    stage = DropDuplicates()
    run(stage, corpus(), tmp_path)
    assert len(pickle.dumps(stage)) < 4096


def test_a_second_fit_in_the_same_scratch_is_not_served_stale_decisions(tmp_path: Path) -> None:
    stage = DropDuplicates()
    scratch = str(tmp_path / "scratch")
    for texts, expected in (
        (["Same words here.", "same words here"], "exact_of:a"),
        (["Different words here.", "Nothing like the first one"], None),
    ):
        table = pa.table({C.ID: ["a", "b"], C.TEXT: texts})
        path = str(tmp_path / "summary.parquet")
        pq.write_table(stage.observe(table), path)
        stage.fit(FitContext([path], scratch, LocalExecutor()))
        assert stage(table).column(C.DROP_REASON).to_pylist() == [None, expected]


def test_apply_before_fit_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="fit"):
        DropDuplicates()(corpus())


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"threshold": 0.0}, "dedup.threshold"),
        ({"threshold": 1.0}, "dedup.threshold"),
        ({"num_perm": 1}, "dedup.num_perm"),
        ({"ngram_size": 0}, "dedup.ngram_size"),
        ({"keep": ""}, "dedup.keep"),
        ({"keep": "two words"}, "dedup.keep"),
        ({"exact": False, "near": False}, "dedup.exact"),
        ({"bands": 4}, "dedup.bands"),
        ({"bands": 20, "rows": 8}, "dedup.num_perm"),
        ({"seed": -1}, "dedup.seed"),
        ({"fold": ("case", "accents")}, "dedup.fold"),
    ],
)
def test_invalid_parameters_name_the_field(params: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        DropDuplicates(**params)


def test_parameters_from_the_command_line() -> None:
    stage = configure(
        DropDuplicates(),
        {"threshold": "0.8", "keep": "-ppl", "bands": "16", "rows": "8", "fold": "case,digits"},
    )
    assert isinstance(stage, DropDuplicates)
    assert (stage.threshold, stage.keep, stage.bands, stage.rows) == (0.8, "-ppl", 16, 8)
    assert stage.fold == ("case", "digits")
    assert stage.sketch().bands == 16
    with pytest.raises(ConfigError, match=r"dedup\.num_perm"):
        configure(DropDuplicates(), {"num_perm": "64", "bands": "16", "rows": "8"})


def test_index_of_an_earlier_output(tmp_path: Path) -> None:
    rng = random.Random(8)
    earlier = pa.table({C.ID: ["old-1", "old-2"], C.TEXT: [ENGLISH[10], ENGLISH[11]]})
    output = tmp_path / "earlier.parquet"
    pq.write_table(earlier, output)
    index = str(tmp_path / "index")
    build_index(DropDuplicates(), [str(output)], index)
    new = pa.table(
        {
            C.ID: ["new-1", "new-2", "new-3", "a-new-4"],
            C.TEXT: [
                edit_words(ENGLISH[10], 0.02, rng),
                ENGLISH[11].lower(),
                ENGLISH[12],
                edit_words(ENGLISH[10], 0.02, rng),
            ],
        }
    )
    result = decisions(run(DropDuplicates(index=index), new, tmp_path, shards=2))
    assert result["new-1"] == ("near_duplicate_of:old-1", "old-1")
    assert result["a-new-4"] == ("near_duplicate_of:old-1", "old-1")  # earlier rows always win
    assert result["new-2"] == ("exact_of:old-2", "old-2")
    assert result["new-3"] == (None, None)
    with pytest.raises(ConfigError, match=r"dedup\.index: .* ngram_size=5 \(now 3\)"):
        run(DropDuplicates(index=index, ngram_size=3), new, tmp_path, shards=3)
    with pytest.raises(ConfigError, match=r"dedup\.index"):
        run(DropDuplicates(index=str(tmp_path / "nothing")), new, tmp_path, shards=4)


def test_index_joins_split_chunks_back_into_documents(tmp_path: Path) -> None:
    document = ENGLISH[20]
    cut = len(document) // 2
    output = pa.table(
        {
            C.ID: ["doc#1", "doc#0", "other"],
            C.PARENT_ID: ["doc", "doc", "other"],
            C.TEXT: [document[cut:], document[:cut], ENGLISH[21]],
        }
    )
    pq.write_table(output, tmp_path / "out.parquet")
    index = str(tmp_path / "index")
    build_index(DropDuplicates(), [str(tmp_path / "out.parquet")], index)
    new = pa.table({C.ID: ["copy"], C.TEXT: [document]})
    assert decisions(run(DropDuplicates(index=index), new, tmp_path)) == {"copy": ("exact_of:doc", "doc")}


def test_local_and_ray_executors_agree(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    from dataclean.executors.ray import RayExecutor

    table = corpus()
    local = decisions(run(DropDuplicates(), table, tmp_path, shards=3))
    executor = RayExecutor(workers=2)
    try:
        remote = decisions(run(DropDuplicates(), table, tmp_path, shards=3, executor=executor))
    finally:
        executor.close()
    assert local == remote


@pytest.mark.parametrize("workers", [1, 2, 3, 8])
@pytest.mark.parametrize("size", [0.0, 5.5, 11.2, 40.0])
def test_partition_counts_keep_every_worker_busy_in_the_last_round(workers: int, size: float) -> None:
    count = _partitions(size * PARTITION_BYTES, workers)
    assert count % workers == 0
    assert count >= 2 * workers and count * PARTITION_BYTES >= size * PARTITION_BYTES
    assert count < max(2 * workers, size + 1) + workers  # rounded up by less than one round


def test_decisions_filed_by_shard_give_the_same_result_and_each_shard_holds_its_own(tmp_path: Path) -> None:
    table = corpus()
    whole = run(DropDuplicates(), table, tmp_path, shards=4)
    stage = DropDuplicates()
    by_shard = run(stage, table, tmp_path, shards=4, by_shard=True)
    assert by_shard.equals(whole)
    assert stage.decisions is not None
    bounds = [table.num_rows * s // 4 for s in range(5)]
    loaded = []
    for shard in range(4):
        decisions = Decisions.load(stage.decisions, shard)
        shard_ids = set(table.column(C.ID).to_pylist()[bounds[shard] : bounds[shard + 1]])
        held = set(decisions.table.column("id").to_pylist())
        assert held <= shard_ids  # a worker applying shard s holds shard s's decisions only
        loaded.append(len(decisions))
    assert sum(loaded) == len(Decisions.load(stage.decisions)) > max(loaded)


def test_bands_are_chosen_in_prepare_not_at_construction(tmp_path: Path) -> None:
    # Building the default recipe (and so checking every --set) must not import datasketch and
    # scipy (0.4 s before Ray may start); the driver resolves the bands in prepare, and the
    # workers get them with the pickled stage.
    script = textwrap.dedent(
        """
        import pickle, sys
        from pipelines.default import build
        from dataclean.dedup.lsh import choose_bands
        stages = build()
        assert "datasketch" not in sys.modules
        [dedup] = [s for s in stages if s.name == "dedup"]
        dedup.prepare(sys.argv[1])
        shipped = pickle.loads(pickle.dumps(dedup))
        assert shipped._bands_rows == choose_bands(dedup.threshold, dedup.num_perm) == (23, 5)
        print("ok")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]
    given = DropDuplicates(bands=8, rows=8)
    assert given.bands_rows() == (8, 8) and given.sketch().bands == 8
