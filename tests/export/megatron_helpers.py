"""What the Megatron tests share: megatron-core imported quietly, and small exports."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from dataclean.executors.local import LocalExecutor
from dataclean.export.megatron.run import export_megatron
from dataclean.export.tokenizer import BYTES, PackTokenizer
from tests.pack.helpers import cut_to_bytes, sample_paragraphs, write_run


def megatron_datasets() -> Any:
    """megatron.core.datasets (the reference), or skip when megatron-core is not installed. Its
    import warns that Transformer Engine and Apex are missing: harmless on CPU."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pytest.importorskip("megatron.core.datasets")


def paragraphs(count: int, start: int = 0, limit: int = 600) -> list[str]:
    """`count` real paragraphs of the bundled sample (English, web, Chinese), each at most
    `limit` UTF-8 bytes."""
    texts = sample_paragraphs()
    return [cut_to_bytes(texts[(start + k) % len(texts)], limit) for k in range(count)]


def export_run(
    tmp_path: Path, name: str, texts: list[str], files: int = 3, tokenizer: str = BYTES, **options: Any
) -> tuple[str, dict[str, Any]]:
    """`texts` written as a run and exported with the local executor: (prefix, summary)."""
    run = write_run(tmp_path / f"{name}-run", texts, files=files)
    prefix = str(tmp_path / name / "corpus")
    summary = export_megatron(str(run), prefix, PackTokenizer(tokenizer), LocalExecutor(), **options)
    return prefix, summary
