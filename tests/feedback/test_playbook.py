"""The playbook in a plain PyTorch loop: watch a spike, roll back in process, lr factor and ramp.

Real tiny CPU training runs (`tiny_training.TinyRun`: SGD, a LambdaLR schedule, the quarantine
sampler, the guard holding the whole state). A corrupt stretch of data is planted: a batch with
four garbage samples (a data spike, about 2.5x its level), then batches with one garbage sample
each (about 1.4x: no spike, but the loss stays above the pre-spike band). The answer key (which
rows are garbage, which step spikes) is the test's; the lr of each update is measured from the
update itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from dataclean.feedback.playbook import Playbook  # noqa: E402
from dataclean.ids import text_hash  # noqa: E402
from dataclean.quarantine.lists import read_list  # noqa: E402

from .tiny_training import BASE_LR, TinyRun, schedule  # noqa: E402

torch.set_num_threads(1)

SPIKE = 80
TAIL = range(SPIKE + 1, SPIKE + 13)  # one garbage sample in each of these batches
PLAYBOOK = Playbook(watch_steps=8, settle_steps=4, ramp_steps=10)
SPIKE_JUNK = [f"junk-{SPIKE}-{slot}" for slot in (3, 7, 11, 15)]


def records(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "incidents.jsonl").read_text().splitlines()]


def decisions(folder: Path) -> list[tuple[int, str]]:
    return [(r["step"], r["decision"]) for r in records(folder) if r["event"] == "decision"]


def test_no_recovery_after_a_data_spike_rolls_back_to_the_checkpoint_with_a_lower_lr_ramped_back(tmp_path):
    run = TinyRun(tmp_path, {SPIKE: 4, **dict.fromkeys(TAIL, 1)}, playbook=PLAYBOOK)
    run.train(130)
    run.guard.close()
    end = SPIKE + PLAYBOOK.watch_steps
    spikes = [r for r in records(tmp_path) if r["event"] == "spike"]
    assert [(r["step"], r["diagnosis"], r["action"]) for r in spikes] == [(SPIKE, "data", "watch")]
    assert sorted(spikes[0]["blamed"]) == sorted(SPIKE_JUNK)
    made = decisions(tmp_path)
    assert made[:2] == [(SPIKE, "watch"), (end, "rollback")], made
    rollback = next(r for r in records(tmp_path) if r.get("decision") == "rollback")
    assert "not recovered" in rollback["why"] and rollback["checkpoint_step"] == SPIKE
    # The restored weights are the checkpoint's, tensor for tensor.
    saved = torch.load(run.checkpoints[SPIKE], weights_only=True)
    assert run.restored is not None and run.restored.keys() == saved["model"].keys()
    assert all(torch.equal(run.restored[k], saved["model"][k]) for k in saved["model"])
    assert not all(torch.equal(run.model.state_dict()[k], saved["model"][k]) for k in saved["model"])
    # The blamed samples were drawn once, at the spike, and never in the replay.
    first = [ids for step, ids in run.drawn[: end + 1]]
    replay = [i for step, ids in run.drawn[end + 1 :] for i in ids]
    assert set(SPIKE_JUNK) <= set(first[SPIKE]) and not set(SPIKE_JUNK) & set(replay)
    assert run.drawn[end + 1][0] == SPIKE  # the replay starts at the checkpoint's step
    listed = read_list(tmp_path / "quarantine.parquet").to_pylist()
    hashes = {i: text_hash(run.texts[i]) for i in SPIKE_JUNK}  # the guard hashed the batch's texts
    assert {r["sample_id"]: r["text_hash"] for r in listed} == hashes
    assert {r["sample_id"]: r["text"] for r in listed} == {i: run.texts[i] for i in SPIKE_JUNK}
    # The lr: the factor times the schedule, held until the loss is back in the band, then ramped.
    ramp = [step for step, decision in made if decision == "ramp"]
    assert len(ramp) == 1 and ramp[0] > TAIL[-1], made  # the loss falls once the garbage tail is over
    assert (ramp[0] + PLAYBOOK.ramp_steps, "schedule") in made
    replayed = run.lrs[end:]
    assert replayed[0][0] == SPIKE
    for step, used in replayed:
        done = min(1.0, max(0, step - ramp[0]) / PLAYBOOK.ramp_steps)
        factor = PLAYBOOK.lr_factor + (1 - PLAYBOOK.lr_factor) * done
        assert used == pytest.approx(factor * BASE_LR * schedule(step), rel=1e-3), step
    before = dict(run.lrs[:end])
    assert before[SPIKE - 1] == pytest.approx(BASE_LR * schedule(SPIKE - 1), rel=1e-3)
    assert run.scheduler.last_epoch == 130  # the schedule counts the updates of the kept timeline


def test_a_spike_that_recovers_within_the_window_is_not_rolled_back(tmp_path):
    run = TinyRun(tmp_path, {SPIKE: 4}, playbook=PLAYBOOK)
    run.train(SPIKE + 20)
    run.guard.close()
    assert decisions(tmp_path) == [(SPIKE, "watch"), (SPIKE + PLAYBOOK.watch_steps, "recovered")]
    assert not any(v.rollback or v.stop for v in run.verdicts)
    assert [step for step, _ in run.drawn] == list(range(SPIKE + 20))
    assert all(used == pytest.approx(BASE_LR * schedule(step), rel=1e-3) for step, used in run.lrs)


def test_a_second_spike_while_watching_rolls_back_and_the_replay_skips_both_batches(tmp_path):
    run = TinyRun(tmp_path, {SPIKE: 4, SPIKE + 1: 4}, playbook=PLAYBOOK)
    run.train(SPIKE + 30)
    run.guard.close()
    made = decisions(tmp_path)
    assert made[:2] == [(SPIKE, "watch"), (SPIKE + 1, "rollback")], made
    assert "second spike" in next(r["why"] for r in records(tmp_path) if r.get("decision") == "rollback")
    junk = {i for i in run.ids if i.startswith("junk-")}
    replay = [i for _, ids in run.drawn[SPIKE + 2 :] for i in ids]
    assert len(junk) == 8 and not junk & set(replay)
    assert sorted(read_list(tmp_path / "quarantine.parquet").column("sample_id").to_pylist()) == sorted(junk)


def test_skip_does_not_advance_the_scheduler_for_the_dropped_update(tmp_path):
    run = TinyRun(tmp_path, {SPIKE: 4}, action={"data": "skip"})
    run.train(SPIKE + 5)
    run.guard.close()
    used = dict(run.lrs)
    assert used[SPIKE] == 0.0  # the spike's update was dropped
    # The next update uses the lr the dropped one would have used: the schedule counts updates.
    assert used[SPIKE + 1] == pytest.approx(BASE_LR * schedule(SPIKE), rel=1e-3)
    assert used[SPIKE + 4] == pytest.approx(BASE_LR * schedule(SPIKE + 3), rel=1e-3)
    assert run.scheduler.last_epoch == SPIKE + 4


def test_rollback_without_a_checkpoint_before_the_spike_stops_and_says_why(tmp_path):
    run = TinyRun(tmp_path, {SPIKE: 4}, action="rollback", checkpoint_every=1000)
    verdict = run.train(SPIKE + 5)
    assert verdict is not None and verdict.stop and verdict.step == SPIKE
    assert decisions(tmp_path) == [(SPIKE, "stop")]
    assert "no checkpoint before the spike" in verdict.message
