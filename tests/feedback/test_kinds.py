"""The review of kinds on a real tiny CPU training run: one planted bad source among clean ones.

Four sources of a small synthetic language (each token the previous one plus 1 or 2, mod 32),
two languages across them; the samples of one source (`forum`) have a third of their tokens
replaced at random, a persistent loss the model can never learn away (no single batch spikes).
The model trains three epochs under the guard (its loss log), then `dataclean feedback` joins the
log with the corpus's columns. The answer key (which source is bad) is the test's. The statistics
are checked against scipy's (`mannwhitneyu`, `false_discovery_control`).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch")

from dataclean.cli import cli  # noqa: E402
from dataclean.feedback.analysis.kinds import _ranks, benjamini_hochberg, mann_whitney_greater  # noqa: E402
from dataclean.feedback.guard import TrainingGuard  # noqa: E402
from dataclean.feedback.monitor import SpikeMonitor  # noqa: E402
from dataclean.feedback.sampler import DatasetQuarantine  # noqa: E402
from dataclean.feedback.torch_utils import per_sample_loss  # noqa: E402
from dataclean.quarantine.lists import read_list  # noqa: E402

torch.set_num_threads(1)

VOCAB, LENGTH, BATCH = 32, 16, 16
SOURCES = ("wiki", "books", "news", "forum")
BAD = "forum"
PER_SOURCE = 96


def corpus() -> pa.Table:
    rng = np.random.default_rng(3)
    rows = []
    for source in SOURCES:
        for k in range(PER_SOURCE):
            steps = 1 + rng.integers(0, 2, LENGTH)
            tokens = (rng.integers(0, VOCAB) + np.concatenate([[0], np.cumsum(steps)])) % VOCAB
            if source == BAD:
                broken = rng.random(LENGTH + 1) < 0.33
                tokens = np.where(broken, rng.integers(0, VOCAB, LENGTH + 1), tokens)
            rows.append(
                {
                    "id": f"{source}-{k:03d}",
                    "text": " ".join(str(int(t)) for t in tokens),
                    "source": source,
                    "lang": "en" if k % 3 else "zh",
                }
            )
    order = rng.permutation(len(rows))
    return pa.Table.from_pylist([rows[i] for i in order])


def train(table: pa.Table, logs: Path, epochs: int = 3) -> None:
    torch.manual_seed(0)
    ids = table.column("id").to_pylist()
    tokens = torch.tensor([[int(t) for t in text.split()] for text in table.column("text").to_pylist()])
    model = torch.nn.Sequential(torch.nn.Embedding(VOCAB, 32), torch.nn.Linear(32, VOCAB))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.02)
    guard = TrainingGuard(logs, monitor=SpikeMonitor(window=20, warmup=15, min_ratio=1.5))
    generator = torch.Generator().manual_seed(0)
    step = 0
    for _ in range(epochs):
        order = torch.randperm(len(ids), generator=generator)
        for start in range(0, len(ids), BATCH):
            rows = order[start : start + BATCH]
            batch = tokens[rows]
            losses = per_sample_loss(model(batch[:, :-1]), batch[:, 1:])
            loss = losses.mean()
            optimizer.zero_grad()
            loss.backward()
            guard.check(step, loss, [ids[i] for i in rows.tolist()], losses, optimizer=optimizer)
            optimizer.step()
            step += 1
    guard.close()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("kinds")
    table = corpus()
    (root / "out" / "data").mkdir(parents=True)
    pq.write_table(table, root / "out" / "data" / "part-0.parquet")
    with open(root / "in.jsonl", "w") as handle:
        for row in table.to_pylist():
            handle.write(json.dumps(row) + "\n")
    train(table, root / "logs")
    command = ["feedback", "--losses", str(root / "logs" / "losses"), "--steps", str(root / "logs" / "steps")]
    result = CliRunner().invoke(cli, [*command, "--corpus", str(root / "out"), "-o", str(root / "feedback")])
    assert result.exit_code == 0, result.output
    return root


def test_the_planted_bad_source_ranks_first_with_its_counts_effect_and_confidence(trained):
    kinds = json.loads((trained / "feedback" / "kinds.json").read_text())
    first = kinds[0]
    assert (first["column"], first["value"]) == ("source", BAD), kinds[:3]
    assert first["flagged"] and first["samples"] == PER_SOURCE
    assert first["effect"] > 0.9 and first["q_value"] < 1e-6
    assert all(e["sample_id"].startswith(BAD) for e in first["examples"])
    flagged = {(k["column"], k["value"]) for k in kinds if k["flagged"]}
    assert flagged == {("source", BAD)}, flagged  # neither language nor a clean source
    report = (trained / "feedback" / "report.md").read_text()
    assert "## Kinds of samples that keep losing" in report and f"source={BAD}" in report


def test_outliers_are_listed_for_review_and_nothing_is_applied_until_accepted(trained):
    listed = read_list(trained / "feedback" / "quarantine.parquet")
    rows = listed.to_pylist()
    outliers = [r for r in rows if r["reason"] == "loss_outlier"]
    assert len(outliers) >= 20 and {r["action"] for r in outliers} == {"review"}
    assert sum(r["sample_id"].startswith(BAD) for r in outliers) >= 0.9 * len(outliers)
    # The pipeline and the training sampler leave review entries alone.
    path = trained / "feedback" / "quarantine.parquet"
    ids = pq.read_table(trained / "out" / "data").column("id").to_pylist()
    assert DatasetQuarantine(ids, path).excluded.sum() == 0
    run = ["run", str(trained / "in.jsonl"), "--only", "quarantine", "--executor", "local", "--quiet"]
    run += ["--set", "quarantine.near_duplicates=false", "--quarantine", str(path)]
    result = CliRunner().invoke(cli, [*run, "-o", str(trained / "before")])
    assert result.exit_code == 0, result.output
    assert json.loads((trained / "before" / "stats.json").read_text())["totals"]["quarantined"] == 0
    # Accepted by group: the bad source's listed samples are dropped, the rest stays for review.
    accept = ["feedback", "accept", str(path), "--group", f"source={BAD}", "--corpus", str(trained / "out")]
    result = CliRunner().invoke(cli, accept)
    assert result.exit_code == 0, result.output
    after = {r["sample_id"]: r["action"] for r in read_list(path).to_pylist()}
    bad = {r["sample_id"] for r in outliers if r["sample_id"].startswith(BAD)}
    assert {i for i, a in after.items() if a == "drop" and i in bad} == bad
    others = {r["sample_id"] for r in outliers} - bad
    assert all(after[i] == "review" for i in others)
    assert DatasetQuarantine(ids, path).excluded.sum() == len(bad)
    result = CliRunner().invoke(cli, [*run, "-o", str(trained / "after")])
    assert result.exit_code == 0, result.output
    quarantined = pq.read_table(trained / "after" / "quarantined").column("id").to_pylist()
    assert set(quarantined) == bad


def test_the_statistics_agree_with_scipy():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(7)
    for shift in (0.0, 0.3, 1.0):
        inside = np.round(rng.normal(shift, 1, 40), 1)  # rounded: ties, as medians of z-scores have
        rest = np.round(rng.normal(0, 1, 300), 1)
        ranks, ties = _ranks(np.concatenate([inside, rest]))
        effect, p = mann_whitney_greater(ranks, np.arange(340) < 40, ties)
        expected = stats.mannwhitneyu(inside, rest, alternative="greater", method="asymptotic")
        assert effect == pytest.approx(expected.statistic / (40 * 300), rel=1e-12)
        assert p == pytest.approx(expected.pvalue, rel=1e-9)
    p_values = rng.uniform(0, 0.2, 30)
    assert benjamini_hochberg(p_values) == pytest.approx(stats.false_discovery_control(p_values))
