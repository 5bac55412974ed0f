"""Load a pipeline recipe by name (`pipelines/NAME.py`) or from a user's own Python file."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from types import ModuleType

from dataclean.errors import ConfigError
from dataclean.stage import Stage


def load_module(recipe: str) -> ModuleType:
    """The recipe's module: `pipelines.NAME`, or a Python file loaded under a stable name."""
    if recipe.endswith(".py") or os.sep in recipe:
        if not os.path.exists(recipe):
            raise ConfigError(f"--pipeline {recipe}: no such file")
        digest = hashlib.sha1(os.path.abspath(recipe).encode()).hexdigest()[:12]
        name = f"dataclean_recipe_{digest}"  # stable across processes: it is part of the config
        spec = importlib.util.spec_from_file_location(name, recipe)
        if spec is None or spec.loader is None:
            raise ConfigError(f"--pipeline {recipe}: cannot load as Python")
        module = importlib.util.module_from_spec(spec)
        # Registered so dataclasses and type hints resolve; marked so executors that ship stages
        # to other processes send this module's classes by value (workers cannot import it).
        module.__dataclean_recipe__ = True  # type: ignore[attr-defined]
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(f"pipelines.{recipe}")
    except ModuleNotFoundError as error:
        if error.name != f"pipelines.{recipe}":
            raise
        raise ConfigError(f"--pipeline {recipe}: no recipe of that name (try 'default')") from None


def load_recipe(recipe: str) -> list[Stage]:
    """The stages of a recipe: its `build()` result, or its `STAGES` list."""
    module = load_module(recipe)
    if hasattr(module, "build"):
        stages = module.build()
    elif hasattr(module, "STAGES"):
        stages = list(module.STAGES)
    else:
        raise ConfigError(f"--pipeline {recipe}: defines neither build() nor STAGES")
    for stage in stages:
        if not isinstance(stage, Stage):
            raise ConfigError(f"--pipeline {recipe}: {stage!r} is not a dataclean Stage")
    return list(stages)
