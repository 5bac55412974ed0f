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

A helper is compiled to machine code by numba too, though no call ever reaches that code: a kernel
links the helper's LLVM IR into its own module and optimizes and compiles it there. Importing this
module makes numba skip that step for functions without entry points (`_link_only_helpers`): 16% of
the quality stage's compile CPU (5.1 of 32.2 s, `benchmarks/bench_compile.py`); the kernels'
results and their cached code are what they were (the helpers' code reaches them as IR either way).

Every kernel is compiled with `nogil=True`: it touches only the arrays it is given, and while the
driver runs a run's first shards itself (`dataclean.run.session`), the thread starting Ray beside it
gets the interpreter between two kernel calls instead of waiting for each to return (`ray.init`
took 3.4 s instead of 4.5 s beside a 30,000-document run on 2 cores, one measurement each).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numba

# numba's options for a function with no entry point from Python or C (its type stubs omit them).
_HELPER_OPTIONS: dict[str, Any] = {"no_cpython_wrapper": True, "no_cfunc_wrapper": True}


def helper(function: Callable[..., Any]) -> Any:
    """`function` compiled for calls from compiled code only (see the module docstring)."""
    return numba.njit(**_HELPER_OPTIONS)(function)


_LOWERING = threading.local()  # whether the function numba is lowering in this thread has no entry point


def _link_only_helpers() -> None:
    """Make numba leave functions without entry points (`helper`s, its own library functions) as
    LLVM IR for the kernels that link them, instead of also compiling each to machine code in this
    process (module docstring). Their IR is optimized as before; only the code no call could
    reach is not built. Numba internals, checked for: with another numba, nothing changes."""
    from numba.core import codegen, cpu, typed_passes

    library_class = codegen.CPUCodeLibrary
    needed = ("_finalize_final_module", "_finalize_dynamic_globals", "_verify_declare_only_symbols")
    if getattr(typed_passes.NativeLowering, "_dataclean_link_only", False) or not all(
        hasattr(library_class, name) for name in needed
    ):
        return
    lower: Callable[..., Any] = typed_passes.NativeLowering.run_pass
    get_executable: Callable[..., Any] = cpu.CPUContext.get_executable
    finalize_final_module: Callable[..., Any] = library_class._finalize_final_module

    def run_pass(self: Any, state: Any) -> Any:
        outer = getattr(_LOWERING, "link_only", False)
        _LOWERING.link_only = bool(state.flags.no_cpython_wrapper and state.flags.no_cfunc_wrapper)
        try:
            return lower(self, state)
        finally:
            _LOWERING.link_only = outer

    def executable(self: Any, library: Any, fndesc: Any, env: Any) -> Any:
        if not getattr(_LOWERING, "link_only", False):
            return get_executable(self, library, fndesc, env)
        from numba import _dynfunc  # type: ignore[attr-defined]

        library._dataclean_link_only = True
        library._ensure_finalized()
        name = fndesc.qualname.split(".")[-1]
        # No address: nothing calls it (numba makes this object for every function it compiles).
        return _dynfunc.make_function(fndesc.lookup_module(), name, "", 0, env, (library,))

    def finalize(self: Any) -> None:
        if not getattr(self, "_dataclean_link_only", False):
            finalize_final_module(self)
            return
        self._finalize_dynamic_globals()
        self._verify_declare_only_symbols()
        self._finalized = True  # its module is linked into kernels, never added to the JIT

    setattr(typed_passes.NativeLowering, "run_pass", run_pass)  # noqa: B010 - methods, for mypy
    setattr(typed_passes.NativeLowering, "_dataclean_link_only", True)  # noqa: B010
    setattr(cpu.CPUContext, "get_executable", executable)  # noqa: B010
    setattr(library_class, "_finalize_final_module", finalize)  # noqa: B010


_link_only_helpers()
