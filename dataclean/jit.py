"""How dataclean's numba code is written so that a first run after install compiles little.

Numba compiles every function a kernel calls, and every library function it uses (each
`np.empty` or `np.zeros` dtype and shape among them), as a unit of its own, in each process that
needs it, and caches only the kernels. Three rules keep that work small without changing the
loops themselves (`benchmarks/bench_compile.py` measures it per stage and per function):

- Helpers, the functions only compiled code calls, are compiled by `helper`: without the two
  entry points numba builds for every function, one for calls from Python (it unboxes each
  argument: for a helper taking arrays and tuples of arrays, most of its compile time) and one for
  calls from C, and without a cache entry of their own. The kernels that call them are cached with
  their code linked in, so a warm run neither compiles nor loads a helper. A function Python
  calls too is compiled twice from one definition: `numba.njit(cache=True, nogil=True)(f)` for Python and
  `helper(f)` for the kernels. Small helpers are `helper`s too rather than numba's
  `inline="always"`, which types their code again at each call site: LLVM inlines them anyway
  (fastText's hashing helpers: 0.2 s less to compile, the same speed).
- Kernels take their arrays from Python: the function that calls a kernel allocates its outputs
  and scratch space, so no kernel compiles `np.empty`, `np.zeros` or `np.full` (about 0.1 s of
  CPU each, per dtype and shape, per process).
- A loop that runs a few times per batch (over chunks of a batch) is Python calling a kernel per
  turn, not a kernel of its own: a kernel's code is optimized again inside every kernel that
  calls it.

Every kernel is compiled with `nogil=True`: it touches only the arrays it is given, and while the
driver runs a run's first shards itself (`dataclean.run.session`), the thread starting Ray beside it
gets the interpreter between two kernel calls instead of waiting for each to return (`ray.init`
took 3.4 s instead of 4.5 s beside a 30,000-document run on 2 cores, one measurement each).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba

# numba's options for a function with no entry point from Python or C (its type stubs omit them).
_HELPER_OPTIONS: dict[str, Any] = {"no_cpython_wrapper": True, "no_cfunc_wrapper": True}


def helper(function: Callable[..., Any]) -> Any:
    """`function` compiled for calls from compiled code only (see the module docstring)."""
    return numba.njit(**_HELPER_OPTIONS)(function)
