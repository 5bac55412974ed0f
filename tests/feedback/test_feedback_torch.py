"""per_sample_loss against PyTorch's own cross-entropy (skipped without torch)."""

from __future__ import annotations

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from dataclean.feedback.torch_utils import per_sample_loss  # noqa: E402


def test_per_sample_loss_matches_cross_entropy_per_row():
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, 7, generator=generator, requires_grad=True)
    labels = torch.randint(0, 7, (3, 5), generator=generator)
    labels[1, 3:] = -100
    labels[2, :] = -100  # nothing scored
    losses, tokens = per_sample_loss(logits, labels, return_tokens=True)
    assert tokens.tolist() == [5, 3, 0]
    for row in range(2):
        keep = labels[row] != -100
        expected = torch.nn.functional.cross_entropy(logits[row][keep], labels[row][keep])
        assert torch.allclose(losses[row], expected)
    assert losses[2].item() == 0.0
    losses.sum().backward()  # gradients flow through
    assert logits.grad is not None


def test_shift_predicts_the_next_token():
    logits = torch.randn(2, 4, 6)
    labels = torch.randint(0, 6, (2, 4))
    shifted = per_sample_loss(logits, labels, shift=True)
    manual = per_sample_loss(logits[:, :-1], labels[:, 1:])
    assert torch.allclose(shifted, manual)


def test_the_core_never_imports_torch():
    code = (
        "import sys; import dataclean.feedback, dataclean.feedback.analysis.cli, "
        "dataclean.stages.quarantine; print('torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr
