"""A Ray cluster of `ray start` nodes on this machine, each node as a machine of its own would be:
its own temp dir, ports and kernel cache (`NUMBA_CACHE_DIR`, `XDG_CACHE_HOME`).

Stopped by killing exactly the processes it started: each node is started with a mark in its
environment (`MARK`), which every process Ray starts for it inherits, and `stop` kills the
processes that carry this cluster's mark. Never `ray stop`, which stops every Ray on the machine
(other tests run embedded Rays beside this one). Its own auth token (`RAY_AUTH_TOKEN`), so the
user's `~/.ray/auth_token` is neither read nor written.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

MARK = "DATACLEAN_TEST_CLUSTER"
RAY = str(Path(sys.executable).with_name("ray"))


def _free_port(avoid: range) -> int:
    """A port free now, outside `avoid` (the node's worker ports: Ray refuses an overlap)."""
    while True:
        with socket.socket() as probe:
            probe.bind(("", 0))
            port = int(probe.getsockname()[1])
        if port not in avoid:
            return port


class LocalCluster:
    """`nodes` nodes of `cpus` CPUs each under `root` (a context manager; module docstring)."""

    def __init__(self, root: Path, nodes: int = 2, cpus: int = 1) -> None:
        self.root = root
        self.count = nodes
        self.cpus = cpus
        self.mark = secrets.token_hex(8)
        self.token = secrets.token_hex(32)
        self.address = ""
        # Ray's temp dirs: short (a Unix socket path has at most 107 bytes), removed by `stop`.
        self.temp = Path(tempfile.mkdtemp(prefix="dc-ray-"))

    def env(self, cache: Path | None = None) -> dict[str, str]:
        """The environment of a process of this cluster (a node, or a driver joining it), with
        `cache` as its kernel cache when given."""
        env = {**os.environ, MARK: self.mark, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self.token}
        # A raylet of a machine shared with other work can take longer than Ray's 10 s to register.
        env["RAY_raylet_start_wait_time_s"] = "120"
        if cache is not None:
            env["NUMBA_CACHE_DIR"] = str(cache / "numba")
            env["XDG_CACHE_HOME"] = str(cache / "xdg")
        return env

    def cache(self, node: int) -> Path:
        """Node `node`'s (1, 2, ...) kernel cache folder."""
        return self.root / f"node{node}" / "cache"

    def __enter__(self) -> LocalCluster:
        try:
            for node in range(1, self.count + 1):
                self._start(node)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    def _start(self, node: int) -> None:
        folder = self.root / f"node{node}"
        folder.mkdir(parents=True, exist_ok=True)
        low = random.randrange(20_000, 60_000, 200)  # worker ports apart from other Rays' defaults
        workers = range(low, low + 200)
        command = [
            RAY,
            "start",
            "--num-cpus",
            str(self.cpus),
            "--temp-dir",
            str(self.temp / f"n{node}"),
            "--disable-usage-stats",
            "--min-worker-port",
            str(low),
            "--max-worker-port",
            str(low + 199),
        ]
        for option in (
            "--node-manager-port",
            "--object-manager-port",
            "--dashboard-agent-listen-port",
            "--dashboard-agent-grpc-port",
            "--runtime-env-agent-port",
            "--metrics-export-port",
        ):
            command += [option, str(_free_port(workers))]
        if node == 1:
            command += ["--head", "--port", str(_free_port(workers)), "--include-dashboard", "false"]
        else:
            command += ["--address", self.address]
        done = subprocess.run(
            command, env=self.env(self.cache(node)), capture_output=True, text=True, timeout=180
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"ray start (node {node}) failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            )
        if node == 1:
            found = re.search(r"ray start --address='([^']+)'", done.stdout + done.stderr)
            if found is None:
                raise RuntimeError(f"no address in ray start's output:\n{done.stdout}\n{done.stderr}")
            self.address = found.group(1)

    def processes(self) -> list[int]:
        """The pids of the processes that carry this cluster's mark."""
        wanted = f"{MARK}={self.mark}".encode()
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == os.getpid():
                continue
            try:
                with open(f"/proc/{name}/environ", "rb") as environ:
                    if wanted in environ.read().split(b"\0"):
                        found.append(int(name))
            except OSError:
                continue
        return found

    def stop(self) -> None:
        """SIGTERM every process of this cluster, then SIGKILL what is left after 2 s (Ray's
        autoscaler monitor ignores SIGTERM)."""
        for sig, wait in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 2.0)):
            pids = self.processes()
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + wait
            while pids and time.monotonic() < deadline:
                time.sleep(0.1)
                pids = self.processes()
            if not pids:
                break
        shutil.rmtree(self.temp, ignore_errors=True)
