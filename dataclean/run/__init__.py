"""The run layer: plan a recipe, run its stages over shards on an executor, write OUT/.

The driver's side is `dataclean.run.pipeline` (`run_pipeline`) and `dataclean.run.session`
(`Session`: the executor started beside the run); a worker's side is `dataclean.run.shard` (one
stage group over one shard) with `dataclean.run.routing` (kept, dropped, copied rows and the
final columns). `plan` checks the recipe, `output` the output folder, `config` and `recipes` turn
the user's settings into stages, `stats` and `progress` say what happened, `kernels` and
`kernel_cache` decide when and where numba kernels compile. docs/architecture.md draws the layers.

The names users import from here load on first use, so `import dataclean` (which sets the
kernel cache from `dataclean.run.kernel_cache`) stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dataclean.run.output import check_paths
    from dataclean.run.pipeline import ALREADY_COMPLETE, run_pipeline, write_run_report
    from dataclean.run.plan import check_columns, plan
    from dataclean.run.session import Session

_EXPORTS = {
    "ALREADY_COMPLETE": "dataclean.run.pipeline",
    "run_pipeline": "dataclean.run.pipeline",
    "write_run_report": "dataclean.run.pipeline",
    "check_paths": "dataclean.run.output",
    "check_columns": "dataclean.run.plan",
    "plan": "dataclean.run.plan",
    "Session": "dataclean.run.session",
}
__all__ = [
    "ALREADY_COMPLETE",
    "Session",
    "check_columns",
    "check_paths",
    "plan",
    "run_pipeline",
    "write_run_report",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'dataclean.run' has no attribute {name!r}")
