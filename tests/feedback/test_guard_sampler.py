"""The quarantine list at training time without torch: matching by id and text hash, weights,
the draw cap, a list changed mid-epoch, and resuming from a sampler state."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from dataclean.feedback.sampler import DatasetQuarantine, QuarantinedDataset, QuarantineSampler
from dataclean.ids import text_hash
from dataclean.quarantine.lists import make_list, write_list

IDS = [f"d{k}" for k in range(10)]
TEXTS = [f"text number {k}" for k in range(10)]


def listing(path, entries):
    write_list(make_list(entries), path)


def test_rows_match_by_id_or_text_hash_and_downweight_becomes_a_loss_weight(tmp_path):
    path = tmp_path / "q.parquet"
    listing(
        path,
        [
            {"sample_id": "d1"},
            {"sample_id": "renamed-elsewhere", "text_hash": text_hash("text number 4")},
            {"sample_id": "d7", "action": "downweight", "weight": 0.25},
        ],
    )
    view = DatasetQuarantine(IDS, path, texts=TEXTS)
    assert np.flatnonzero(view.excluded).tolist() == [1, 4]
    assert view.weights.tolist() == [1, 0, 1, 1, 0, 1, 1, 0.25, 1, 1]
    data = QuarantinedDataset([{"text": t} for t in TEXTS], view)
    assert data[7] == {"text": TEXTS[7], "weight": 0.25}
    assert data[2]["weight"] == 1.0
    drawn = list(QuarantineSampler(view, seed=3))
    assert sorted(drawn) == [0, 2, 3, 5, 6, 7, 8, 9]


def test_from_a_hugging_face_dataset(tmp_path):
    datasets = pytest.importorskip("datasets")
    dataset = datasets.Dataset.from_dict({"sample_id": IDS, "text": TEXTS})
    listing(tmp_path / "q.parquet", [{"sample_id": "d3"}])
    view = DatasetQuarantine.from_dataset(dataset, tmp_path / "q.parquet")
    assert np.flatnonzero(view.excluded).tolist() == [3]
    assert view.text_hash_of("d5") == text_hash(TEXTS[5])
    wrapped = QuarantinedDataset(dataset, view)
    assert wrapped[3]["weight"] == 0.0 and wrapped[3]["sample_id"] == "d3"


def test_a_sample_listed_mid_epoch_is_not_drawn_after_and_max_draws_caps_repeats(tmp_path):
    path = tmp_path / "q.parquet"  # no list yet: everything is drawn
    view = DatasetQuarantine(IDS, path)
    sampler = QuarantineSampler(view, shuffle=False, max_draws=2)
    drawn = []
    for row in sampler:
        drawn.append(row)
        if row == 2:
            listing(path, [{"sample_id": "d5"}, {"sample_id": "d0"}])  # d0 was drawn already
    assert drawn == [0, 1, 2, 3, 4, 6, 7, 8, 9]
    assert list(sampler) == [1, 2, 3, 4, 6, 7, 8, 9]  # epoch 2: d0 and d5 left out
    assert list(sampler) == []  # every other row has been drawn twice: the cap
    assert len(sampler) == 0


def test_state_dict_resumes_the_same_order_without_listed_rows(tmp_path):
    path = tmp_path / "q.parquet"
    sampler = QuarantineSampler(DatasetQuarantine(IDS, path), seed=7)
    iterator = iter(sampler)
    first = [next(iterator) for _ in range(4)]
    state = sampler.state_dict()
    rest = list(iterator)
    later = [IDS[r] for r in rest[:2]]
    listing(path, [{"sample_id": i} for i in later])
    resumed = QuarantineSampler(DatasetQuarantine(IDS, path), seed=7)
    resumed.load_state_dict(state)
    assert list(resumed) == rest[2:]
    assert sorted(first + rest) == list(range(10))


def test_the_guard_and_the_sampler_do_not_import_torch():
    code = (
        "import sys; import dataclean.feedback.guard, dataclean.feedback.sampler, "
        "dataclean.feedback.analysis.replay; print('torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr
