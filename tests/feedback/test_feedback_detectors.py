"""Detectors on synthetic logs: planted outliers found, each spike kind named, no false alarms."""

from __future__ import annotations

import math

import numpy as np
import pyarrow.compute as pc
import pytest

from dataclean.errors import ConfigError
from dataclean.feedback.analysis.outliers import find_outliers
from dataclean.feedback.monitor import SpikeMonitor, detect_spikes
from tests.feedback.planted import PlantedRun
from tests.feedback.planted_analysis import analyze_planted


def small_run(**overrides):
    """300 steps x 16 samples from 1,600 ids (3 epochs) on 4 ranks, warm-up 30 steps."""
    settings = {"steps": 300, "batch": 16, "samples": 1600, "ranks": 4, "warmup": 30, **overrides}
    return PlantedRun(**settings)


def flagged(verdicts):
    return sorted(verdicts.filter(verdicts.column("flagged")).column("sample_id").to_pylist())


def test_clean_log_gives_no_false_alarm(tmp_path):
    analysis = analyze_planted(tmp_path, small_run())
    assert flagged(analysis.verdicts) == []
    assert analysis.spikes == []
    assert analysis.quarantine.num_rows == 0


def test_planted_outliers_found_and_unlucky_sample_spared():
    run = small_run()
    planted = run.plant_outliers(20)
    unlucky = run.plant_unlucky()
    verdicts = find_outliers(run.losses())
    assert flagged(verdicts) == planted
    assert unlucky not in flagged(verdicts)
    row = verdicts.filter(pc.equal(verdicts.column("sample_id"), planted[0])).to_pylist()[0]
    assert row["occurrences"] == 3 and row["reason"] == "loss_outlier" and row["score"] > 3.5


def test_sample_seen_once_is_judged_on_that_occurrence():
    run = small_run(steps=100)
    planted = run.plant_outliers(5)
    assert flagged(find_outliers(run.losses())) == planted


def test_nonfinite_losses_are_counted_and_blame_only_isolated_samples():
    run = small_run()
    lone = np.flatnonzero(run.sample_index == 7)
    run.loss[lone] = np.nan  # one sample NaN every time, its batches otherwise fine
    run.loss[run.rows_at(250)] = np.inf  # a whole batch failed: the step, not its samples
    verdicts = find_outliers(run.losses())
    assert flagged(verdicts) == ["s000007"]
    row = verdicts.filter(pc.equal(verdicts.column("sample_id"), "s000007")).to_pylist()[0]
    assert row["reason"] == "nonfinite_loss" and row["nonfinite"] == 3


@pytest.mark.parametrize("method", ["std", "mad"])
def test_monitor_flags_a_spike_not_jitter_or_a_slightly_high_batch(method):
    rng = np.random.default_rng(1)
    losses = 2.0 + rng.normal(0, 0.05, 300)
    losses[100] = 2.6  # a batch a little high (one bad sample): not a spike
    losses[200] = 7.5
    events = detect_spikes(np.arange(300), losses, SpikeMonitor(method=method))
    assert [e.step for e in events] == [200]
    assert events[0].level == pytest.approx(2.0, abs=0.05)


def test_monitor_records_sample_ids_and_nonfinite_losses():
    monitor = SpikeMonitor(warmup=5)
    for step in range(30):
        assert monitor.update(step, 2.0 + 0.01 * (step % 3), sample_ids=["a"]) is None
    event = monitor.update(30, math.nan, sample_ids=["x", "y"], grad_norm=3.0)
    assert event is not None and event.sample_ids == ["x", "y"] and event.grad_norm == 3.0
    assert monitor.update(31, 2.0) is None  # the spike stayed out of the window


def test_monitor_validates_its_parameters():
    with pytest.raises(ConfigError, match="min_ratio"):
        SpikeMonitor(min_ratio=0.5)
    with pytest.raises(ConfigError, match="method"):
        SpikeMonitor(method="mean")  # type: ignore[arg-type]


def only_spike(analysis):
    assert len(analysis.spikes) == 1, [(s.step, s.diagnosis) for s in analysis.spikes]
    return analysis.spikes[0]


def test_data_spike_names_the_samples(tmp_path):
    run = small_run()
    planted = run.plant_data_spike(180)
    analysis = analyze_planted(tmp_path, run)
    spike = only_spike(analysis)
    assert (spike.step, spike.diagnosis) == (180, "data")
    assert sorted(spike.sample_ids) == planted
    quarantined = analysis.quarantine.to_pylist()
    assert sorted(r["sample_id"] for r in quarantined) == planted
    assert {r["reason"] for r in quarantined} == {"spike:180"}
    assert "Quarantine" in spike.action


def test_grad_explosion(tmp_path):
    run = small_run()
    run.plant_grad_explosion(200, climb=60)
    analysis = analyze_planted(tmp_path, run)
    spike = only_spike(analysis)
    assert spike.diagnosis == "grad_explosion"
    assert any("grad norm rose" in e for e in spike.evidence)
    assert analysis.quarantine.num_rows == 0  # the data is not to blame


def test_fp16_overflow(tmp_path):
    run = small_run()
    run.plant_fp16_overflow(220, nan=True)
    analysis = analyze_planted(tmp_path, run)
    spike = only_spike(analysis)
    assert spike.diagnosis == "fp16_overflow"
    assert any("loss scale fell from 6.554e+04 to 3.277e+04 at step 221" in e for e in spike.evidence)
    assert analysis.nonfinite == 16 and analysis.quarantine.num_rows == 0


def test_lr_overshoot(tmp_path):
    run = small_run()
    run.plant_lr_overshoot(40)
    spike = only_spike(analyze_planted(tmp_path, run))
    assert spike.diagnosis == "lr_overshoot"
    assert any("at its peak" in e for e in spike.evidence)


def test_single_rank(tmp_path):
    run = small_run()
    on_rank = run.plant_single_rank(160, rank=2)
    analysis = analyze_planted(tmp_path, run)
    spike = only_spike(analysis)
    assert spike.diagnosis == "single_rank"
    assert sorted(spike.sample_ids) == on_rank
    assert any("rank 2" in e for e in spike.evidence)


def test_step_log_without_grad_norm_or_loss_scale_still_diagnoses(tmp_path):
    run = small_run()
    planted = run.plant_data_spike(180)
    analysis = analyze_planted(tmp_path, run, columns=("lr",))
    spike = only_spike(analysis)
    assert spike.diagnosis == "data" and sorted(spike.sample_ids) == planted
    assert spike.missing == ["grad_norm", "loss_scale"]
    assert analysis.step_log is not None and analysis.step_log.missing == [
        "grad_norm",
        "loss_scale",
    ]


def test_without_a_step_log_spikes_come_from_the_per_sample_log(tmp_path):
    run = small_run()
    planted = run.plant_data_spike(180)
    analysis = analyze_planted(tmp_path, run, steps=False)
    assert analysis.steps_derived
    spike = only_spike(analysis)
    assert spike.diagnosis == "data" and sorted(spike.sample_ids) == planted
