"""The package's layers, each module's imports checked against the rules of its part.

- text algorithms (`text`, `dedup`, `lang`, `lm`, `quality`, `quarantine`, `jit`): import no contract (no
  stage, no stage contract), no run layer, no executor (only its protocol), no Ray;
- machinery (`io`, `report`, `feedback`, the vocabulary and small shared modules): never import
  stages, the run layer, an executor or Ray;
- stages (`stages/`): never import Ray, an executor, the run layer (`run`, `runner`, `session`,
  `warmup`, `kernel_cache`), the CLI or a recipe;
- the run layer and executors: never import a stage module (the recipe hands them stages);
  only `executors/ray.py` and `executors/ray_startup.py` import Ray;
- the CLI parses and prints: no threads, no `os._exit` (the run layer owns both), no executor or
  runner of its own (`dataclean.session` runs); it may name stage types for its options;
- the training side of feedback never imports the offline analysis's command or report.

Every module of the package belongs to exactly one part, so a new module is checked too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "dataclean"

RUN_LAYER = (
    "dataclean.run",
    "dataclean.runner",
    "dataclean.session",
    "dataclean.warmup",
    "dataclean.kernel_cache",
    "dataclean.progress",
    "dataclean.cli",
    "dataclean.cli_progress",
    "dataclean.recipes",
)
EXECUTORS = ("dataclean.executors",)
# The executors themselves; `dataclean.executors.base` (the protocol a barrier's fit steps are
# mapped with) is an interface any layer may name.
CONCRETE_EXECUTORS = (
    "dataclean.executors.local",
    "dataclean.executors.ray",
    "dataclean.executors.ray_startup",
)
STAGES = ("dataclean.stages",)
CONTRACT = ("dataclean.stage",)
RAY = ("ray",)

# part -> (modules in it, import prefixes it must never use)
PARTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "text algorithms": (
        ("text", "dedup", "lang", "lm", "quality", "quarantine", "contamination", "jit.py"),
        (*STAGES, *CONTRACT, *RUN_LAYER, *CONCRETE_EXECUTORS, *RAY),
    ),
    "machinery": (
        (
            "io",
            "report",
            "feedback",
            "pack",
            "classify",
            "columns.py",
            "errors.py",
            "ids.py",
            "stats.py",
            "config.py",
        ),
        (*STAGES, *RUN_LAYER, *CONCRETE_EXECUTORS, *RAY),
    ),
    "contract": (
        ("stage.py",),
        (*STAGES, *RUN_LAYER, *RAY, "dataclean.executors.local", "dataclean.executors.ray"),
    ),
    "stages": (("stages",), (*RUN_LAYER, *EXECUTORS, *RAY)),
    "run layer": (
        ("run.py", "runner.py", "session.py", "warmup.py", "kernel_cache.py", "progress.py", "recipes.py"),
        (*STAGES, *RAY),
    ),
    # The top: it may name stage types (its shorthand options find their stage by type).
    "cli": (
        ("cli.py", "cli_progress.py"),
        (*RAY, "dataclean.executors.local", "dataclean.executors.ray", "dataclean.runner"),
    ),
    "executors": (("executors",), (*STAGES, *RUN_LAYER)),
    "package": (("__init__.py", "__main__.py"), (*STAGES, *RAY)),
}
RAY_MODULES = {"executors/ray.py", "executors/ray_startup.py"}
# Known exceptions: none left (the report's excerpts use dataclean.text.cleaning, not the stage).
KNOWN: dict[str, set[str]] = {}


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


def _files(entries: tuple[str, ...]) -> list[Path]:
    files: list[Path] = []
    for entry in entries:
        target = PACKAGE / entry
        files.extend(sorted(target.rglob("*.py")) if target.is_dir() else [target])
    return files


def _matches(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_every_module_belongs_to_one_part() -> None:
    owned = [path for entries, _ in PARTS.values() for path in _files(entries)]
    assert sorted(owned) == sorted(set(owned))
    assert set(owned) == set(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("part", sorted(PARTS))
def test_a_part_never_imports_what_its_layer_forbids(part: str) -> None:
    entries, forbidden = PARTS[part]
    offending = {}
    for path in _files(entries):
        relative = str(path.relative_to(PACKAGE))
        never = forbidden if relative not in RAY_MODULES else tuple(f for f in forbidden if f != "ray")
        names = sorted(
            n
            for n in _imports(path)
            if any(_matches(n, prefix) for prefix in never) and n not in KNOWN.get(relative, set())
        )
        if names:
            offending[relative] = names
    assert offending == {}


def test_only_the_ray_executor_imports_ray() -> None:
    importers = {
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if any(_matches(name, "ray") for name in _imports(path))
    }
    assert importers <= RAY_MODULES


def test_the_cli_starts_no_threads_and_never_exits_the_process_itself() -> None:
    source = PACKAGE / "cli.py"
    names = _imports(source)
    assert not [n for n in names if _matches(n, "threading") or _matches(n, "concurrent")]
    calls = [
        node.attr
        for node in ast.walk(ast.parse(source.read_text()))
        if isinstance(node, ast.Attribute) and node.attr in {"_exit", "Thread"}
    ]
    assert calls == []


def test_the_training_side_never_imports_the_analysis_command_or_report() -> None:
    training = sorted((PACKAGE / "feedback").glob("*.py"))
    offending = {
        path.name: sorted(
            n
            for n in _imports(path)
            if any(
                _matches(n, f"dataclean.feedback.analysis.{module}")
                for module in ("cli", "report", "replay_cli")
            )
        )
        for path in training
    }
    assert {name: found for name, found in offending.items() if found} == {}
