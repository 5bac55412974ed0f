"""A watchdog that takes an embedded Ray with it when its driver dies, however it dies.

Ray starts its node processes (GCS, raylet, monitor) with the kernel's parent-death signal, so
they die with the driver; but the raylet's agents (`ray::DashboardAgent`, `ray::RuntimeEnvAgent`)
and idle workers are the raylet's children and outlive a `kill -9` of the driver by a minute or
more (measured here: both agents still alive 40 s after the kill), holding memory and ports on a
shared machine.

`start(driver_pid)` runs this file as a small separate process (its own session, so a Ctrl-C or a
closed terminal reaches only the driver; it imports nothing but the standard library). It reads
the driver's pipe on its standard input and, every half second, notes the driver's descendants
(from /proc: pid, parent, start time). When the pipe closes without the word `done` (the driver
is gone: `kill -9`, a crash, an exit that skipped `RayExecutor.close`), it kills with SIGKILL
every process of the last note that is still the same process (same start time), then those that
appeared under them since, and exits. `stop(handle)` after `ray.shutdown` says `done` and the
watchdog exits without touching anything. The watchdog starts before Ray does, and marks the
driver's environment (`MARK`), which every process Ray starts inherits: a process that appeared
after the last note, and whose parent died first, is found by that mark. Linux only (/proc);
elsewhere `start` returns None.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from typing import IO

NOTE_SECONDS = 0.5
# Set in the driver's environment before Ray starts, so every process Ray starts inherits it: the
# mark of this driver's run, found in /proc/PID/environ even after a process lost its parent.
MARK = "DATACLEAN_RAY_OF"


def start(driver_pid: int) -> subprocess.Popen[bytes] | None:
    """Run the watchdog for `driver_pid` (module docstring); None where there is no /proc. Marks
    this process's environment (`MARK`), for the processes Ray starts from here on."""
    if not os.path.isdir("/proc/self"):
        return None
    os.environ[MARK] = str(driver_pid)
    return subprocess.Popen(
        [sys.executable, "-I", "-S", os.path.abspath(__file__), str(driver_pid)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )


def stop(handle: subprocess.Popen[bytes] | None) -> None:
    """The driver closed its Ray: the watchdog leaves without killing anything."""
    if handle is None or handle.stdin is None:
        return
    try:
        handle.stdin.write(b"done\n")
        handle.stdin.close()
    except OSError:  # it is gone already
        pass
    try:
        handle.wait(timeout=2)
    except subprocess.TimeoutExpired:
        handle.kill()


def _processes() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, start time) of every process, from /proc/PID/stat."""
    found: dict[int, tuple[int, int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        found[int(name)] = (int(fields[1]), int(fields[19]))  # ppid, starttime
    return found


def descendants(root: int, processes: dict[int, tuple[int, int]]) -> dict[int, int]:
    """pid -> start time of every descendant of `root`."""
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in processes.items():
        children.setdefault(parent, []).append(pid)
    found: dict[int, int] = {}
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found[child] = processes[child][1]
                stack.append(child)
    return found


def _marked(pid: int, mark: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            return mark in environ.read().split(b"\0")
    except OSError:
        return False


def _kill(noted: dict[int, int], driver: int) -> None:
    """SIGKILL the noted processes that are still themselves, what appeared under them, and any
    process carrying the driver's mark (`MARK`): one Ray started after the last note, whose
    parent died first (its children then belong to init, not to anything noted)."""
    current = _processes()
    targets = {pid: start for pid, start in noted.items() if current.get(pid, (0, -1))[1] == start}
    for pid in list(targets):
        targets.update(descendants(pid, current))
    mark = f"{MARK}={driver}".encode()
    for pid, (_, start) in current.items():
        if pid not in targets and _marked(pid, mark):
            targets[pid] = start
    targets.pop(os.getpid(), None)
    for pid in targets:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def watch(driver: int, pipe: IO[bytes]) -> bool:
    """Note the driver's descendants until its pipe closes; kill them unless it said `done`.
    Returns whether it killed."""
    noted: dict[int, int] = {}
    said = b""
    while True:
        ready, _, _ = select.select([pipe], [], [], NOTE_SECONDS)
        if ready:
            chunk = os.read(pipe.fileno(), 64)
            if not chunk:
                break
            said += chunk
            continue
        noted.update(descendants(driver, _processes()))  # all ever seen: `_kill` checks start times
        noted.pop(os.getpid(), None)
    if said.startswith(b"done"):
        return False
    time.sleep(0.05)  # the kernel's own parent-death signals first
    _kill(noted, driver)
    return True


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watch(int(sys.argv[1]), sys.stdin.buffer)
