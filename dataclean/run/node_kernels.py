"""On a cluster, each node compiles (or loads) the recipe's kernels once, beside the run, and says so.

The kernel cache (`dataclean.run.kernel_cache`) is a folder on one machine: the driver's being
warm says nothing of a node's. Left alone, every worker process of a fresh node compiled the
kernels it met with its first shard, in silence: on a 2-node cluster whose nodes were both fresh,
the first group showed 0/20 shards after 12.3 s, against 20/20 by 11.9 s on warm nodes.

`NodeKernels.start`, called by the driver before the first shard, asks every node of the cluster
(`Executor.nodes`) whether its cache holds these stages' kernels (a tiny task pinned to it,
`Executor.on_node`), and waits for the answers (a few seconds at most: the first task on a node
starts a worker process the run needs anyway). On each node that does not, it then queues, before
any shard, one compile task per stage, longest first (`compile_stage`, as on one machine:
`dataclean.run.kernels`), pinned to that node, and a last one that notes the cache is warm; the
progress says `node 2: compiling kernels, first time on this node, about 9 s` and, when done, how
long it took. Those tasks take the node's first CPUs while the run's shards go to the others and
to the other nodes. A node that joins during the run is found within `WATCH_SECONDS` and
prepared the same way (its shards may start beside its compile tasks). A warm node costs the
question alone and prints nothing. Nothing here can fail a run: a node that dies or a compile
task that fails is a note, and its shards compile what they need as they go.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, wait
from typing import Any

from dataclean.executors.base import Executor, Node
from dataclean.run.kernel_cache import kernels_cached, mark_kernels_cached
from dataclean.run.kernels import compile_stage, kernel_stages
from dataclean.run.progress import RunProgress

# How often the driver looks for nodes that joined during the run.
WATCH_SECONDS = 2.0
# How long `start` waits for the nodes' answers before the first shard (a slow node is then
# prepared when it answers).
ANSWER_SECONDS = 20.0


def node_has_kernels(kinds: list[type]) -> bool:
    """On a node: whether its cache holds these stage types' kernels (`kernels_cached`)."""
    return kernels_cached(kinds)


def note_node_has_kernels(kinds: list[type]) -> None:
    """On a node, once every stage compiled there: its cache holds these kernels."""
    mark_kernels_cached(kinds)


def node_estimate(stages: Sequence[Any], cpus: int) -> float:
    """About how many seconds a node with `cpus` CPUs takes to compile these stages, one task
    each: their `compile_seconds` over the CPUs, 1.3 times as long side by side (as
    `dataclean.run.kernels.compile_estimate`), never less than the longest."""
    seconds = [float(type(stage).compile_seconds) for stage in stages]
    if not seconds:
        return 0.0
    return max(max(seconds), 1.3 * sum(seconds) / max(1, min(cpus, len(seconds))))


class NodeKernels:
    """The kernels of `stages` on every node of the cluster `executor` runs on (module docstring)."""

    def __init__(self, stages: Sequence[Any], executor: Executor, progress: RunProgress) -> None:
        self._stages = sorted(kernel_stages(stages), key=lambda stage: -type(stage).compile_seconds)
        self._kinds = [type(stage) for stage in self._stages]
        self._executor = executor
        self._progress = progress
        self._numbers: dict[str, int] = {}  # node id -> its number in this run (1, 2, ...)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self.compiled: dict[int, float] = {}  # node number -> seconds it took

    def start(self) -> None:
        """Ask every node now, queue the compile tasks of those that need them, and watch for
        nodes that join; returns once the compile tasks are queued (or `ANSWER_SECONDS`)."""
        if not self._stages:
            return
        asked = [(node, self._ask(node)) for node in self._executor.nodes()]
        wait([answer for _, answer in asked], timeout=ANSWER_SECONDS)
        for node, answer in asked:
            if answer.done():
                self._answered(node, answer)
            else:  # a slow node: prepared when it answers
                self._when_answered(node, answer)
        self._watcher = threading.Thread(target=self._watch, name="dataclean-nodes", daemon=True)
        self._watcher.start()

    def close(self) -> None:
        """Stop watching for new nodes (compile tasks in flight finish on their own)."""
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join()

    def _ask(self, node: Node) -> Future[bool]:
        with self._lock:
            self._numbers.setdefault(node.id, len(self._numbers) + 1)
        try:
            return self._executor.on_node(node_has_kernels, [self._kinds], node)[0]
        except Exception as error:
            failed: Future[bool] = Future()
            failed.set_exception(error)
            return failed

    def _answered(self, node: Node, answer: Future[bool]) -> None:
        number = self._numbers[node.id]
        try:
            if answer.result() or self._stop.is_set():
                return
            estimate = node_estimate(self._stages, node.cpus)
            where = f"{node.address}, id {node.id[:8]}"
            self._progress.note(
                f"node {number}: compiling kernels, first time on this node, about {estimate:.0f} s ({where})"
            )
            started = time.perf_counter()
            compiling = self._executor.on_node(compile_stage, self._stages, node)
        except Exception as error:
            self._failed(number, error)
            return
        threading.Thread(
            target=self._finish, args=(node, number, compiling, started), name="dataclean-node", daemon=True
        ).start()

    def _finish(self, node: Node, number: int, compiling: list[Future[None]], started: float) -> None:
        try:
            for future in compiling:
                future.result()
            self._executor.on_node(note_node_has_kernels, [self._kinds], node)[0].result()
        except Exception as error:
            self._failed(number, error)
            return
        self.compiled[number] = time.perf_counter() - started
        if self._stop.is_set():
            return  # the run has ended (and said its last line) before this node was done
        self._progress.note(f"node {number}: kernels compiled in {self.compiled[number]:.1f} s")

    def _failed(self, number: int, error: BaseException) -> None:
        if self._stop.is_set():
            return  # the run is over: a node left with it
        first = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
        self._progress.note(
            f"node {number}: kernels not prepared ({type(error).__name__}: {first}); "
            "its shards compile what they need"
        )

    def _watch(self) -> None:
        """Every `WATCH_SECONDS`: ask each node that joined since (`_answered` then prepares it)."""
        while not self._stop.wait(WATCH_SECONDS):
            try:
                joined = [node for node in self._executor.nodes() if node.id not in self._numbers]
            except Exception:  # Ray is gone: the run is over
                return
            for node in joined:
                self._when_answered(node, self._ask(node))

    def _when_answered(self, node: Node, answer: Future[bool]) -> None:
        """`_answered` in a thread of its own once `answer` comes (never in Ray's callback
        thread, which must not submit tasks)."""

        def answered(done: Future[bool]) -> None:
            thread = threading.Thread(target=self._answered, args=(node, done), name="dataclean-node")
            thread.daemon = True
            thread.start()

        answer.add_done_callback(answered)
