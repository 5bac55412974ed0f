"""`dataclean pack`: every sample once and whole, little padding, the same bytes on every executor."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from dataclean.cli import cli
from dataclean.errors import ConfigError, InputError
from dataclean.executors.local import LocalExecutor
from dataclean.pack.packer import best_fit_decreasing, naive_truncations, plan_packing
from dataclean.pack.run import pack_corpus
from dataclean.pack.tokenizer import BYTES, PackTokenizer
from dataclean.pack.write import read_packed
from tests.pack.helpers import TOKENIZER, cut_to_bytes, sample_paragraphs, write_run


def reference_best_fit(lengths: list[int], capacity: int) -> list[list[int]]:
    """Best-fit decreasing written the plain way (Ding et al. 2024): a list scan per item."""
    bins: list[list[int]] = []
    room: list[int] = []
    for item in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        fits = [b for b in range(len(bins)) if room[b] >= lengths[item]]
        if fits:
            best = min(fits, key=lambda b: (room[b], b))
        else:
            bins.append([])
            room.append(capacity)
            best = len(bins) - 1
        bins[best].append(item)
        room[best] -= lengths[item]
    return bins


def test_best_fit_places_items_as_the_plain_algorithm_would() -> None:
    rng = np.random.default_rng(7)
    lengths = rng.integers(1, 300, size=600)
    bin_of, order, count = best_fit_decreasing(lengths, 512)
    fills = np.bincount(bin_of, weights=lengths, minlength=count)
    reference = reference_best_fit(lengths.tolist(), 512)
    # Which of two bins with equal room takes an item changes nothing after it: the fill levels
    # of the bins are the same as the plain algorithm's, bin for bin up to that order.
    assert count == len(reference)
    assert sorted(fills.tolist()) == sorted(float(sum(lengths[b])) for b in reference)
    assert fills.max() <= 512
    assert list(order) == sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))


def rows_by_sample(folder: Path) -> tuple[dict[str, list[list[int]]], list[dict[str, Any]]]:
    """Every sample's token spans as written, and the rows."""
    rows = read_packed(str(folder)).to_pylist()
    spans: dict[str, list[list[int]]] = {}
    for row in rows:
        for sample_id, start, length in zip(
            row["sample_ids"], row["sample_starts"], row["sample_lengths"], strict=True
        ):
            spans.setdefault(sample_id, []).append(row["input_ids"][start : start + length])
    return spans, rows


@pytest.mark.parametrize("spec", [BYTES, str(TOKENIZER)])
def test_every_sample_once_whole_with_the_tokenizers_tokens(tmp_path: Path, spec: str) -> None:
    texts = sample_paragraphs()[:1500]
    tokenizer = PackTokenizer(spec)
    seq_len = 1024
    if spec == BYTES:
        expected = [list(t.encode("utf-8")) for t in texts]
    else:
        from tokenizers import Tokenizer

        hf = Tokenizer.from_file(spec)
        expected = [hf.encode(t, add_special_tokens=False).ids for t in texts]
    short = [i for i, e in enumerate(expected) if len(e) < seq_len]
    run = write_run(tmp_path / "run", [texts[i] for i in short])
    summary = pack_corpus(
        str(run), str(tmp_path / "packed"), tokenizer, seq_len, LocalExecutor(), rows_per_file=50
    )
    spans, rows = rows_by_sample(tmp_path / "packed")
    assert summary["samples"] == len(short) == len(spans)
    assert summary["split_samples"] == 0
    for k, i in enumerate(short):
        assert spans[f"doc{k}"] == [[*expected[i], tokenizer.end_of_sample_id]]
    assert all(len(row["input_ids"]) == seq_len for row in rows)
    assert summary["sequences"] == len(rows)
    assert summary["tokens"] == sum(len(e) + 1 for e in (expected[i] for i in short))
    on_disk = json.loads((tmp_path / "packed" / "pack.json").read_text())
    keys = {"sequences", "tokens", "samples", "padding_fraction", "split_samples", "tokenizer", "seq_len"}
    assert keys | {"seed"} <= set(on_disk)
    # everything after the last span of a row is padding
    for row in rows:
        end = row["sample_starts"][-1] + row["sample_lengths"][-1]
        assert set(row["input_ids"][end:]) <= {tokenizer.padding_id}


def test_padding_at_most_one_percent_on_real_samples_of_a_quarter_sequence(tmp_path: Path) -> None:
    seq_len = 2048
    texts = [cut_to_bytes(p, seq_len // 4 - 1) for p in sample_paragraphs()]
    texts = [t for t in texts if t]
    assert len(texts) >= 3000
    run = write_run(tmp_path / "run", texts)
    summary = pack_corpus(str(run), str(tmp_path / "packed"), PackTokenizer(BYTES), seq_len, LocalExecutor())
    assert summary["samples"] == len(texts)
    assert summary["padding_fraction"] <= 0.01
    lengths = np.array([len(t.encode()) + 1 for t in texts])
    assert naive_truncations(lengths, seq_len) > 0.1 * summary["sequences"]  # what packing avoids


def test_long_samples_are_cut_into_whole_sequences_and_a_packed_rest(tmp_path: Path) -> None:
    texts = ["a" * 2500, "b" * 100, "c" * 1023, "d" * 2047]
    run = write_run(tmp_path / "run", texts, files=1)
    summary = pack_corpus(str(run), str(tmp_path / "packed"), PackTokenizer(BYTES), 1024, LocalExecutor())
    spans, _ = rows_by_sample(tmp_path / "packed")
    assert summary["split_samples"] == 2  # 1023 bytes + end-of-sample fit exactly
    whole = sorted(spans["doc0"], key=len, reverse=True)
    assert [len(s) for s in whole] == [1024, 1024, 453] and whole[2][-1] == 256
    assert sum(piece.count(ord("a")) for piece in whole) == 2500
    assert spans["doc2"] == [[ord("c")] * 1023 + [256]]
    assert summary["tokens"] == 2501 + 101 + 1024 + 2048


def test_weights_are_carried_per_span(tmp_path: Path) -> None:
    texts = ["one sample", "another one", "a third"]
    run = write_run(tmp_path / "run", texts, files=1, weights=[1.0, 0.25, 1.0])
    pack_corpus(str(run), str(tmp_path / "packed"), PackTokenizer(BYTES), 64, LocalExecutor())
    row = read_packed(str(tmp_path / "packed")).to_pylist()[0]
    assert dict(zip(row["sample_ids"], row["sample_weights"], strict=True)) == {
        "doc0": 1.0,
        "doc1": 0.25,
        "doc2": 1.0,
    }


def test_seed_shuffles_the_sequences_and_no_shuffle_keeps_packing_order() -> None:
    lengths = np.arange(1, 200)
    first, again, other = (plan_packing(lengths, 256, s) for s in (0, 0, 1))
    assert np.array_equal(first.sequence, again.sequence)
    assert not np.array_equal(first.sequence, other.sequence)
    assert sorted(set(first.sequence.tolist())) == list(range(first.sequences))


def file_bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_byte_identical_on_every_executor_and_worker_count(tmp_path: Path, ray_executor: Any) -> None:
    from dataclean.executors.ray import RayExecutor

    texts = sample_paragraphs()[:3000]
    run = write_run(tmp_path / "run", texts, files=5)
    tokenizer = PackTokenizer(str(TOKENIZER))
    outputs = []
    for name, engine in [
        ("local", LocalExecutor()),
        ("ray2", ray_executor),
        ("ray1", RayExecutor(workers=1)),  # joins the session's Ray, one task at a time
    ]:
        pack_corpus(str(run), str(tmp_path / name), tokenizer, 512, engine, seed=3, rows_per_file=64)
        outputs.append(file_bytes(tmp_path / name))
    pack_json = [json.loads(o.pop("pack.json")) for o in outputs]
    assert len(outputs[0]) > 3
    assert outputs[0] == outputs[1] == outputs[2]
    assert pack_json[0]["sequences"] == pack_json[2]["sequences"]


def test_quarantine_list_repacks_without_listed_samples(tmp_path: Path) -> None:
    from dataclean.quarantine.lists import make_list, write_list

    texts = sample_paragraphs()[:200]
    run = write_run(tmp_path / "run", texts)
    listed = tmp_path / "quarantine.parquet"
    write_list(
        make_list(
            [
                {"sample_id": "doc3"},
                {"sample_id": "doc10"},
                {"sample_id": "doc11", "action": "downweight", "weight": 0.5},
            ]
        ),
        listed,
    )
    summary = pack_corpus(
        str(run),
        str(tmp_path / "packed"),
        PackTokenizer(BYTES),
        1024,
        LocalExecutor(),
        quarantine=str(listed),
    )
    rows = read_packed(str(tmp_path / "packed")).to_pylist()
    weights = {i: w for row in rows for i, w in zip(row["sample_ids"], row["sample_weights"], strict=True)}
    assert "doc3" not in weights and "doc10" not in weights
    assert weights["doc11"] == 0.5
    assert summary["quarantined"] == 2 and summary["samples"] == 198 == len(weights)


def test_cli_packs_a_run_and_refuses_to_overwrite(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", sample_paragraphs()[:100])
    packed = tmp_path / "packed"
    arguments = ["pack", str(run), "-o", str(packed), "--tokenizer", str(TOKENIZER), "--seq-len", "256"]
    result = CliRunner().invoke(cli, [*arguments, "--executor", "local"])
    assert result.exit_code == 0, result.output
    assert "100 samples" in result.output
    again = CliRunner().invoke(cli, [*arguments, "--executor", "local"])
    assert again.exit_code != 0 and "--overwrite" in again.output
    missing = CliRunner().invoke(
        cli,
        [
            "pack",
            str(tmp_path / "nothing"),
            "-o",
            str(tmp_path / "p2"),
            "--tokenizer",
            "bytes",
            "--seq-len",
            "64",
            "--executor",
            "local",
        ],
    )
    assert missing.exit_code != 0 and "no Parquet files" in missing.output


def test_bad_tokenizer_and_null_text_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        PackTokenizer(str(tmp_path / "missing.json"))
    with pytest.raises(ConfigError, match="--eos-token"):
        PackTokenizer(str(TOKENIZER), end_of_sample="<nope>")
    run = write_run(tmp_path / "run", ["fine", None], files=1)  # type: ignore[list-item]
    with pytest.raises(InputError, match=r"row 1 .*null 'text'"):
        pack_corpus(str(run), str(tmp_path / "packed"), PackTokenizer(BYTES), 64, LocalExecutor())
