"""Executors run work items in parallel: `local` (in-process) and `ray` (Ray tasks)."""

from __future__ import annotations

from dataclean.errors import ConfigError
from dataclean.executors.base import Executor


def make_executor(name: str = "ray", address: str | None = None, workers: int | None = None) -> Executor:
    """`local` or `ray` (embedded local Ray unless `address` names a cluster)."""
    if name == "local":
        from dataclean.executors.local import LocalExecutor

        return LocalExecutor()
    if name == "ray":
        from dataclean.executors.ray import RayExecutor

        return RayExecutor(address=address, workers=workers)
    raise ConfigError(f"--executor must be 'ray' or 'local', got {name!r}")
