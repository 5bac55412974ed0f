"""The package's layers, in order: a module may import its own layer and the layers below it, never
one above (docs/architecture.md draws them).

    vocabulary      columns, errors, ids, jit
    protocol        executors/base.py (what an executor and a mapped function declare)
    io              io/
    algorithms      text, lang, lm, quality, dedup, quarantine, contamination, classify
    contract        stage.py
    machinery       report, feedback, pack, export (what runs beside or after a run)
    stages          stages/
    executors       executors/ (the concrete ones)
    run layer       run/, session.py
    cli             cli/ and every subcommand module (`*/cli.py`, `*_cli.py`)

Imports count at any level (inside functions and TYPE_CHECKING too), and a module named in a string
(`importlib.import_module("dataclean.x")`, a table of lazily imported commands) counts as imported.
Beside the order: the run layer and the executors never import a stage (the recipe hands them
stages); only `executors/ray.py` and `executors/ray_startup.py` import Ray; the CLI starts no
threads and only `cli/exit.py` leaves the process with `os._exit`; the training side of
`feedback` never imports the offline analysis (`feedback/analysis/`).

`dataclean/__init__.py` sets the kernel cache (`dataclean.run.kernel_cache`, which imports nothing
of dataclean) before any kernel module loads: the one import of the package root, allowed by name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "dataclean"

# Lowest first: (layer, the package entries in it).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("vocabulary", ("columns.py", "errors.py", "ids.py", "jit.py")),
    ("protocol", ("executors/base.py",)),
    ("io", ("io",)),
    ("algorithms", ("text", "lang", "lm", "quality", "dedup", "quarantine", "contamination", "classify")),
    ("contract", ("stage.py",)),
    ("machinery", ("report", "feedback", "pack", "export")),
    ("stages", ("stages",)),
    ("executors", ("executors",)),
    ("run layer", ("run", "session.py")),
    ("cli", ("cli", "__main__.py")),
]
ROOT = "__init__.py"
ROOT_ALLOWED = {"run/kernel_cache.py"}
RAY_MODULES = {"executors/ray.py", "executors/ray_startup.py"}


def _is_command(relative: str) -> bool:
    """A subcommand's module (`pack/cli.py`, `feedback/supervise_cli.py`): part of the CLI layer."""
    name = relative.rsplit("/", 1)[-1]
    return name == "cli.py" or name.endswith("_cli.py")


def _layer_of(relative: str) -> int:
    """The layer of a module by its path relative to the package; the most specific entry wins."""
    if _is_command(relative):
        return len(LAYERS) - 1
    best, length = -1, -1
    for rank, (_, entries) in enumerate(LAYERS):
        for entry in entries:
            if (relative == entry or relative.startswith(entry.rstrip("/") + "/")) and len(entry) > length:
                best, length = rank, len(entry)
    return best


def _module_path(name: str) -> str | None:
    """`dataclean.a.b` -> the file it names, relative to the package, if it is one of ours."""
    parts = name.split(".")
    if parts[0] != "dataclean":
        return None
    for end in range(len(parts), 1, -1):
        base = PACKAGE.joinpath(*parts[1:end])
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return str(candidate.relative_to(PACKAGE))
    return None


def _imports(path: Path) -> set[str]:
    """Every module a file imports, at any level, and every module it names in a string."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            parts = text.split(".")
            named = parts[0] == "dataclean" and len(parts) > 1 and all(p.isidentifier() for p in parts)
            if named and _module_path(text):
                found.add(text)
    return found


def _ours(path: Path) -> list[tuple[str, str]]:
    """(module name, its file relative to the package) for each dataclean module `path` imports."""
    by_target: dict[str, str] = {}
    for name in sorted(_imports(path)):
        target = _module_path(name)
        if target is not None:
            by_target.setdefault(target, name)
    return [(name, target) for target, name in sorted(by_target.items())]


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _relative(path: Path) -> str:
    return str(path.relative_to(PACKAGE))


def _matches(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_every_module_has_a_layer() -> None:
    unplaced = [_relative(p) for p in _modules() if _relative(p) != ROOT and _layer_of(_relative(p)) < 0]
    assert unplaced == []


def test_no_module_imports_a_layer_above_its_own() -> None:
    upward: dict[str, list[str]] = {}
    for path in _modules():
        relative = _relative(path)
        if relative == ROOT:
            extra = sorted(name for name, target in _ours(path) if target not in ROOT_ALLOWED)
            if extra:
                upward[relative] = extra
            continue
        rank = _layer_of(relative)
        above = sorted(
            f"{name} ({LAYERS[_layer_of(target)][0]})"
            for name, target in _ours(path)
            if target != ROOT and _layer_of(target) > rank
        )
        if above:
            upward[f"{relative} ({LAYERS[rank][0]})"] = above
    assert upward == {}


def test_the_layering_check_fails_on_an_upward_import(tmp_path: Path) -> None:
    """The check itself: a vocabulary module importing the run layer is found."""
    fake = tmp_path / "columns.py"
    fake.write_text("from dataclean.run.pipeline import run_pipeline\nimport dataclean.stages.clean\n")
    found = sorted(target for _, target in _ours(fake) if _layer_of(target) > _layer_of("columns.py"))
    assert found == ["run/pipeline.py", "stages/clean.py"]
    lazy = tmp_path / "lazy.py"
    lazy.write_text('import importlib\nimportlib.import_module("dataclean.cli.progress")\n')
    assert [target for _, target in _ours(lazy)] == ["cli/progress.py"]


@pytest.mark.parametrize("entry", ["run", "session.py", "executors"])
def test_the_run_layer_and_executors_never_import_a_stage(entry: str) -> None:
    root = PACKAGE / entry
    files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
    found = {_relative(p): sorted(n for n, t in _ours(p) if t.startswith("stages/")) for p in files}
    assert {k: v for k, v in found.items() if v} == {}


def test_only_the_ray_executor_imports_ray() -> None:
    importers = {_relative(p) for p in _modules() if any(_matches(n, "ray") for n in _imports(p))}
    assert importers <= RAY_MODULES


def test_the_cli_starts_no_threads_and_only_its_exit_leaves_the_process() -> None:
    # (cli/progress.py, the live display, refreshes its line from a thread of its own; cli/piped.py
    # starts none, but locks its stream and keeps each thread's unfinished message apart.)
    threaded = ("progress.py", "piped.py")
    for path in sorted(p for p in (PACKAGE / "cli").rglob("*.py") if p.name not in threaded):
        names = _imports(path)
        assert not [n for n in names if _matches(n, "threading") or _matches(n, "concurrent")], path
        calls = [
            node.attr
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Attribute) and node.attr in {"_exit", "Thread"}
        ]
        assert calls == ([] if path.name != "exit.py" else ["_exit"]), path


def test_the_training_side_never_imports_the_offline_analysis() -> None:
    training = sorted((PACKAGE / "feedback").glob("*.py"))
    offending = {
        path.name: sorted(n for n in _imports(path) if _matches(n, "dataclean.feedback.analysis"))
        for path in training
        if not _is_command(_relative(path))
    }
    assert {name: found for name, found in offending.items() if found} == {}
