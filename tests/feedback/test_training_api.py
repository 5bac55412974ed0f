"""The training side's front door: one import, torch only when used, no offline analysis on the
live path, and every import the README and the docs show for it works."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "dataclean" / "feedback"
TRAINING_API = (
    "TrainingGuard",
    "TrainingState",
    "Playbook",
    "per_sample_loss",
    "DatasetQuarantine",
    "QuarantinedDataset",
    "LossLogWriter",
    "StepLogWriter",
    "PackedQuarantine",
    "PackedDataset",
    "collate_packed",
    "packed_attention_mask",
    "flat_sample_ids",
)
IMPORT = re.compile(r"from (dataclean\.feedback[\w.]*) import ")


def run(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    return result.stdout.strip()


def test_the_package_imports_neither_torch_nor_the_analysis_until_a_torch_name_is_used():
    pytest.importorskip("torch")
    code = (
        "import sys\n"
        "from dataclean.feedback import TrainingGuard, Playbook, DatasetQuarantine, LossLogWriter\n"
        "import dataclean.feedback.guard, dataclean.feedback.supervise\n"
        "print(sorted(m for m in sys.modules if m in ('torch', 'transformers')"
        " or m.startswith('dataclean.feedback.analysis')))\n"
        "from dataclean.feedback import per_sample_loss, TrainingState\n"
        "print('torch' in sys.modules)"
    )
    assert run(code).splitlines() == ["[]", "True"]


def test_every_training_name_comes_from_one_import():
    pytest.importorskip("torch")
    feedback = importlib.import_module("dataclean.feedback")
    for name in TRAINING_API:
        assert getattr(feedback, name) is not None, name
        assert name in feedback.__all__
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = feedback.nothing


def test_the_live_path_never_imports_the_offline_analysis():
    """No module of the feedback package outside `analysis/` imports it (lazily neither)."""
    for path in PACKAGE.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module":
                names = [
                    a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
                ]
            assert not any(n.startswith("dataclean.feedback.analysis") for n in names), (path.name, names)


def shown_imports() -> list[tuple[str, str, str]]:
    """(file, module, name) of every `from dataclean.feedback... import ...` in README and docs."""
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        for match in IMPORT.finditer(text):
            rest = text[match.end() :]
            if rest.startswith("("):  # a parenthesized list over several lines
                names = rest[1 : rest.index(")")]
            else:  # to the end of the line (or of an inline span that a line break folds)
                names = re.split(r"`|(?<!,)\n", rest, maxsplit=1)[0]
            names = re.sub(r"#[^\n]*", "", names)
            words = re.findall(r"\w+", names)
            aliases = {words[i + 1] for i, word in enumerate(words[:-1]) if word == "as"}
            found += [(path.name, match.group(1), w) for w in words if w != "as" and w not in aliases]
    return found


def test_every_import_the_readme_and_docs_show_for_the_training_side_works():
    pytest.importorskip("torch")
    shown = shown_imports()
    assert {"TrainingGuard", "per_sample_loss", "DatasetQuarantine"} <= {n for _, _, n in shown}
    for where, module, name in shown:
        if name == "GuardedTrainer" or module.endswith("guard_hf"):
            pytest.importorskip("transformers")
        assert hasattr(importlib.import_module(module), name), f"{where}: from {module} import {name}"


def test_every_dotted_feedback_name_in_the_readme_and_docs_resolves():
    """`dataclean.feedback.guard.TrainingGuard` and the like, as the docs name them in text."""
    pytest.importorskip("torch")
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for dotted in re.findall(r"`(dataclean\.feedback(?:\.\w+)*)", path.read_text(encoding="utf-8")):
            module, _, name = dotted.rpartition(".")
            try:
                importlib.import_module(dotted)
            except ModuleNotFoundError:
                if "guard_hf" in module:
                    pytest.importorskip("transformers")
                assert hasattr(importlib.import_module(module), name), f"{path.name}: {dotted}"
