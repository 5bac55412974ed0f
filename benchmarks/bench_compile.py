"""What each numba kernel costs to compile on a first run: CPU seconds per stage and per kernel.

    python benchmarks/bench_compile.py [--top 25]

Runs each default stage's `compile_kernels` (a rehearsal for a stage with `rehearse`, dedup's, as
a run compiles it: `dataclean.run.kernels.compile_stage`) in this process with `NUMBA_CACHE_DIR` an
empty temporary folder (every kernel compiles, as on a first run after install) and listens to numba's
`numba:compile` events. Per kernel it prints the CPU time of its compile with the compiles it
triggers (inclusive, for kernels a stage calls directly) and without them (own: the callees and
numba's library implementations, such as `np.empty` or an error message's string formatting, are
counted apart), and per stage the part spent in LLVM (numba's LLVM lock: optimizing, parsing IR
text, machine code; the rest is numba's typing and lowering in Python). Run it beside another
checkout (`PYTHONPATH=OTHER python OTHER/benchmarks/...`)
to compare; CPU time of this thread, so a loaded machine changes the figures less than wall time.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="dataclean-bench-compile-")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from numba.core import event


class CompileTimes(event.Listener):  # type: ignore[misc]
    """CPU time of each compiled signature, inclusive and own, and which were compiled first."""

    def __init__(self) -> None:
        self.stack: list[list[Any]] = []
        self.own: dict[str, float] = {}
        self.outer: dict[str, float] = {}

    def on_start(self, ev: Any) -> None:
        function = ev.data["dispatcher"].py_func
        name = f"{function.__module__}.{function.__qualname__}{tuple(ev.data['args'])}"
        self.stack.append([name, time.thread_time(), 0.0])

    def on_end(self, ev: Any) -> None:
        name, start, children = self.stack.pop()
        spent = time.thread_time() - start
        self.own[name] = self.own.get(name, 0.0) + spent - children
        if self.stack:
            self.stack[-1][2] += spent
        else:
            self.outer[name] = self.outer.get(name, 0.0) + spent


class LlvmTime(event.Listener):  # type: ignore[misc]
    """CPU time of this thread inside numba's LLVM lock (outermost acquisitions only)."""

    def __init__(self) -> None:
        self.depth = 0
        self.started = 0.0
        self.total = 0.0

    def on_start(self, ev: Any) -> None:
        if self.depth == 0:
            self.started = time.thread_time()
        self.depth += 1

    def on_end(self, ev: Any) -> None:
        self.depth -= 1
        if self.depth == 0:
            self.total += time.thread_time() - self.started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=25, help="kernels to list by own compile time")
    args = parser.parse_args()
    times = CompileTimes()
    event.register("numba:compile", times)
    llvm = LlvmTime()
    event.register("numba:llvm_lock", llvm)
    from dataclean.run.kernels import compile_stage
    from pipelines.default import build

    total = 0.0
    for stage in build():
        start, in_llvm = time.thread_time(), llvm.total
        compile_stage(stage)
        spent = time.thread_time() - start
        total += spent
        if spent > 0.01:
            print(f"stage {type(stage).__name__:<20} {spent:6.2f} s CPU (LLVM {llvm.total - in_llvm:5.2f})")
    print(f"all stages             {total:6.2f} s CPU (LLVM {llvm.total:5.2f}; one process)")
    print("\nkernels a stage calls, with what they trigger:")
    for name, spent in sorted(times.outer.items(), key=lambda item: -item[1]):
        print(f"  {spent:6.2f}  {name[:110]}")
    print(f"\nown compile time, top {args.top} of {len(times.own)} signatures:")
    for name, spent in sorted(times.own.items(), key=lambda item: -item[1])[: args.top]:
        print(f"  {spent:6.2f}  {name[:110]}")
    library = sum(s for n, s in times.own.items() if not n.startswith(("dataclean.", "pipelines.")))
    print(f"numba's library implementations: {library:.2f} s")


if __name__ == "__main__":
    main()
