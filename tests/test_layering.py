"""The package's layers: machinery never imports the stages that wrap it, nor Ray."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "dataclean"
MACHINERY = ["dedup", "lm", "text", "io", "feedback", "pack"]


def _imports(path: Path) -> set[str]:
    """Every module a file imports, at any level (inside functions and TYPE_CHECKING too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


@pytest.mark.parametrize("package", MACHINERY)
def test_machinery_does_not_import_stages_or_ray(package: str) -> None:
    files = sorted((PACKAGE / package).glob("*.py"))
    assert files
    offending = {
        str(path.relative_to(PACKAGE)): sorted(
            name for name in _imports(path) if name.startswith(("dataclean.stages", "ray"))
        )
        for path in files
    }
    assert {path: names for path, names in offending.items() if names} == {}
