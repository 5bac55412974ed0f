"""Two data-parallel ranks (torch.distributed, gloo, two real processes): the garbage batch is on
rank 1 only, and with `agree=max_over_ranks` both ranks skip that step, so the replicas stay
identical (each rank's guard sees only its own batch)."""

from __future__ import annotations

import os
import socket

import pytest

torch = pytest.importorskip("torch")

from dataclean.feedback.guard import TrainingGuard  # noqa: E402
from dataclean.feedback.monitor import SpikeMonitor  # noqa: E402
from dataclean.feedback.torch_utils import max_over_ranks, per_sample_loss  # noqa: E402
from dataclean.quarantine.lists import read_list  # noqa: E402
from tests.feedback.test_guard import BATCH, JUNK_IDS, SPIKE_STEP, VOCAB, corpus  # noqa: E402


def worker(rank: int, folder: str, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    torch.distributed.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(0)
    ids, rows = corpus()
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Embedding(VOCAB, 32), torch.nn.Linear(32, VOCAB))
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.05)
    guard = TrainingGuard(
        f"{folder}/rank{rank}",
        action={"data": "skip"},
        quarantine=f"{folder}/quarantine.parquet",
        rank=rank,
        monitor=SpikeMonitor(window=20, warmup=15),
        log=False,
        agree=max_over_ranks,
    )
    for step in range(SPIKE_STEP + 1):
        # Rank 1 reads the corpus's batches (garbage at the spike step); rank 0 the clean one before.
        start = (step if rank == 1 or step < SPIKE_STEP else step - 1) * BATCH
        batch = torch.from_numpy(rows[start : start + BATCH])
        losses = per_sample_loss(model(batch[:, :-1]), batch[:, 1:])
        optimizer.zero_grad()
        losses.mean().backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if step == SPIKE_STEP:
            before = [p.detach().clone() for p in model.parameters()]
        verdict = guard.check(
            step, losses.mean(), ids[start : start + BATCH], losses, grad_norm=grad_norm, optimizer=optimizer
        )
        optimizer.step()
    after = [p.detach().clone() for p in model.parameters()]
    torch.save(
        {
            "unchanged": all(torch.equal(a, b) for a, b in zip(before, after, strict=True)),
            "after": after,
            "skip": verdict.skip,
            "incidents": [(i.step, i.diagnosis, sorted(i.blamed)) for i in guard.incidents],  # loss order
        },
        f"{folder}/rank{rank}.pt",
    )
    torch.distributed.destroy_process_group()


def test_ranks_skip_the_step_together(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    torch.multiprocessing.spawn(worker, args=(str(tmp_path), port), nprocs=2)
    zero, one = (torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1))
    assert one["incidents"] == [(SPIKE_STEP, "data", JUNK_IDS)]
    assert zero["incidents"] == []  # rank 0's batch was normal: it skips because rank 1 asked
    assert zero["skip"] and one["skip"]
    assert zero["unchanged"] and one["unchanged"]
    assert all(torch.equal(a, b) for a, b in zip(zero["after"], one["after"], strict=True))
    assert sorted(read_list(tmp_path / "quarantine.parquet").column("sample_id").to_pylist()) == JUNK_IDS
