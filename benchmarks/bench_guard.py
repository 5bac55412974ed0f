"""The training guard's cost per step, on the feedback example's training loop.

The loop is `examples/feedback_loop/train.py`'s: its byte-level transformer (2 layers, width 128),
batch 32 x 128 bytes, AdamW, gradient clipping, on the CPU. Texts are the repository's own docs
(the content does not matter for timing). Three arms run interleaved, in rounds, from the same
starting weights, so the machine's drift hits them alike:

- `bare`: the loop alone;
- `guard`: plus `TrainingGuard.check` every step (spike monitor, step history), logs off;
- `guard+logs`: the guard as it is by default, also writing the per-sample and step logs.

Reported: the median step time of each arm, the guard's own time per step (timed around its
call inside the same steps, so neighbours' load cancels out of the ratio) and that as a fraction
of the bare step. Target: at most 1%.

    python benchmarks/bench_guard.py [--steps 40] [--rounds 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "feedback_loop"))
sys.path.insert(0, str(ROOT))

from train import TinyByteLM, encode  # noqa: E402  (the example's model and byte encoding)

from dataclean.feedback.guard import TrainingGuard  # noqa: E402
from dataclean.feedback.torch_utils import per_sample_loss  # noqa: E402

BATCH, SEQ_LEN = 32, 128


def texts() -> list[str]:
    """Paragraphs of the repository's Markdown files (at least one batch's worth)."""
    paragraphs = []
    for path in sorted(ROOT.glob("**/*.md")):
        if ".git" in path.parts:
            continue
        paragraphs += [p for p in path.read_text(encoding="utf-8").split("\n\n") if len(p) > 40]
    while len(paragraphs) < 4 * BATCH:
        paragraphs += paragraphs
    return paragraphs


def run_arm(
    arm: str, state: dict, inputs, labels, steps: int, folder: Path
) -> tuple[list[float], list[float]]:
    """(seconds per step, seconds in the guard per step) for one arm."""
    model = TinyByteLM(SEQ_LEN)
    model.load_state_dict(state)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    guard = None
    if arm != "bare":
        guard = TrainingGuard(folder / arm, log=arm == "guard+logs")
    ids = [f"doc{k}" for k in range(len(inputs))]
    step_times, guard_times = [], []
    generator = torch.Generator().manual_seed(0)
    for step in range(steps):
        rows = torch.randint(0, len(inputs), (BATCH,), generator=generator)
        batch_ids = [ids[i] for i in rows.tolist()]
        started = time.perf_counter()
        losses, tokens = per_sample_loss(model(inputs[rows]), labels[rows], return_tokens=True)
        loss = (losses * tokens).sum() / tokens.sum().clamp(min=1)
        optimizer.zero_grad()
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        spent = 0.0
        if guard is not None:
            checked = time.perf_counter()
            guard.check(
                step, loss, batch_ids, losses, grad_norm=grad_norm, optimizer=optimizer, tokens=tokens
            )
            spent = time.perf_counter() - checked
        optimizer.step()
        step_times.append(time.perf_counter() - started)
        guard_times.append(spent)
    if guard is not None:
        checked = time.perf_counter()
        guard.close()  # the last flush belongs to the guard's cost too
        guard_times[-1] += time.perf_counter() - checked
    return step_times, guard_times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    inputs, labels = encode(texts(), SEQ_LEN)
    state = TinyByteLM(SEQ_LEN).state_dict()
    arms = ("bare", "guard", "guard+logs")
    steps: dict[str, list[float]] = {a: [] for a in arms}
    guard: dict[str, list[float]] = {a: [] for a in arms}
    with tempfile.TemporaryDirectory() as work:
        run_arm("bare", state, inputs, labels, 5, Path(work))  # warm-up
        for round_ in range(args.rounds):
            for arm in arms:
                times, spent = run_arm(arm, state, inputs, labels, args.steps, Path(work) / str(round_))
                steps[arm] += times[1:]  # the first step of an arm warms its allocations
                guard[arm] += spent[1:]
    bare = statistics.median(steps["bare"])
    print(
        f"{args.steps} steps x {args.rounds} rounds, batch {BATCH} x {SEQ_LEN} bytes, "
        f"{args.threads} thread(s)"
    )
    print(f"{'arm':<12} {'step ms':>9} {'guard ms/step':>14} {'guard / bare step':>18}")
    for arm in arms:
        per_step = statistics.fmean(guard[arm])  # mean: the rare flush counts in full
        print(
            f"{arm:<12} {statistics.median(steps[arm]) * 1e3:>9.2f} {per_step * 1e3:>14.3f} "
            f"{per_step / bare:>17.2%}"
        )


if __name__ == "__main__":
    main()
