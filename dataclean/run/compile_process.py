"""A helper process that compiles stages' kernels beside the driver on a first run.

`dataclean.run.kernels` starts one (per core the driver leaves free) as soon as a first run's
stages are loaded, and hands it stages from the queue the driver takes from too: it compiles
them into the kernel cache every process of the run shares, and the run's processes load them
from there. Why not Ray's workers, as before: they exist only once Ray is up (3-5 s into a
first run, and a worker then imports dataclean before its first task), and Ray starts them
at niceness 15, so that on a machine with anything else to run a worker compiling got a few
percent of a core (a first run on 2 cores at a load of 6: the worker took 34 s of wall time for
dedup's 6.6 s of compile CPU, while the driver waited for it). A helper is an ordinary child
of the driver: same priority, started at once.

The protocol is the smallest there is: the parent writes each stage pickled, preceded by its
length (8 bytes, little-endian), and reads one byte back when it is compiled: `+`, or `-` when
the helper could not (a stage whose class it cannot import: a recipe defined in a script, for
one), and then the driver compiles that stage itself, so a real compile error is raised where
it always was. The helper exits when its input closes (the queue is empty, or the driver died).
"""

from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys
from typing import IO, Any

_LENGTH = struct.Struct("<Q")


def start_helper() -> subprocess.Popen[bytes] | None:
    """A helper process, importing dataclean while the driver goes on; None if it cannot start.
    It imports what this process can (this process's `sys.path`: a recipe next to the user's
    script, a test folder) and uses the same kernel cache (`NUMBA_CACHE_DIR`, set on import)."""
    path = os.pathsep.join(entry or os.getcwd() for entry in sys.path)
    env = {**os.environ, "PYTHONPATH": path}
    command = [sys.executable, "-m", "dataclean.run.compile_process"]
    try:
        pipe = subprocess.PIPE
        return subprocess.Popen(command, stdin=pipe, stdout=pipe, stderr=subprocess.DEVNULL, env=env)
    except OSError:
        return None


def compile_in_helper(helper: subprocess.Popen[bytes], stage: Any) -> bool:
    """Have `helper` compile `stage`'s kernels; whether it did (False: compile it here)."""
    assert helper.stdin is not None and helper.stdout is not None
    try:
        data = pickle.dumps(stage)
        helper.stdin.write(_LENGTH.pack(len(data)) + data)
        helper.stdin.flush()
        return helper.stdout.read(1) == b"+"
    except (OSError, pickle.PicklingError, AttributeError, TypeError):
        return False  # a stage pickle cannot carry, or a helper that died


def stop_helper(helper: subprocess.Popen[bytes]) -> None:
    """Close the helper's input (it exits after the stage it compiles) and reap it."""
    try:
        if helper.stdin is not None:
            helper.stdin.close()
    except OSError:
        pass
    helper.wait()


def _read(stream: IO[bytes], size: int) -> bytes | None:
    data = stream.read(size)
    return data if len(data) == size else None


def serve(source: IO[bytes], answers: IO[bytes]) -> None:
    """The helper's loop: compile each stage read from `source`, answer on `answers`."""
    from dataclean.run.kernels import compile_stage

    while (header := _read(source, _LENGTH.size)) is not None:
        data = _read(source, _LENGTH.unpack(header)[0])
        if data is None:
            return
        try:
            compile_stage(pickle.loads(data))
            answer = b"+"
        except Exception:  # the driver compiles it again, and raises what fails there
            answer = b"-"
        answers.write(answer)
        answers.flush()


if __name__ == "__main__":
    import dataclean  # noqa: F401 - the shared kernel cache, before any kernel module

    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # what a stage prints cannot garble the answers
    serve(sys.stdin.buffer, answers)
