"""Every import the README and docs show works: each `from dataclean... import a, b` and `import
dataclean...` written in README.md or docs/*.md (code blocks and inline code alike) names a module
that imports and names it provides."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# `from dataclean.x import a, b` to the end of its line (or of its parentheses), `as` names allowed.
FROM = re.compile(r"from (dataclean(?:\.\w+)*) import (\([^)]*\)|[\w ,]+)")
IMPORT = re.compile(r"(?<![\w.])import (dataclean(?:\.\w+)*)")


def _shown() -> list[tuple[str, str, str | None]]:
    """(document, module, name or None) for each import the documents show."""
    found: set[tuple[str, str, str | None]] = set()
    for doc in DOCS:
        text = doc.read_text()
        for module, names in FROM.findall(text):
            for part in names.strip("()").split(","):
                words = part.split("#")[0].split()
                if words and words[0].isidentifier():  # (`a as b`: a; prose after a name: ignored)
                    found.add((doc.name, module, words[0]))
        for module in IMPORT.findall(text):
            found.add((doc.name, module, None))
    return sorted(found, key=lambda item: (item[0], item[1], item[2] or ""))


SHOWN = _shown()


def test_the_docs_show_imports_at_all() -> None:
    assert len(SHOWN) > 20 and {doc for doc, _, _ in SHOWN} >= {"README.md"}


@pytest.mark.parametrize(("doc", "module", "name"), SHOWN, ids=[f"{d}:{m}:{n}" for d, m, n in SHOWN])
def test_each_import_the_docs_show_works(doc: str, module: str, name: str | None) -> None:
    imported = importlib.import_module(module)
    if name is not None:
        assert hasattr(imported, name) or importlib.util.find_spec(f"{module}.{name}") is not None, (
            f"{doc} shows `from {module} import {name}`"
        )
