"""The end of the `dataclean` program (never called from a library function)."""

from __future__ import annotations

import logging
import os
import sys


def exit_process(code: int | str | None) -> None:
    """End the `dataclean` program: flush what the command wrote, then leave without the
    interpreter's teardown of Ray's, Arrow's and numba's native modules, which takes another
    0.4-0.6 s after a run (measured on the 1M-document benchmark) and does nothing a finished
    command needs. Unless Ray is still up (an embedded Ray is stopped by its atexit hook): then
    exit the ordinary way. (A Ray still starting in the session's thread ends with the process: its
    watchdog takes its processes along.) Only for the program's own process, never from a library call."""
    ray = sys.modules.get("ray")
    is_initialized = getattr(ray, "is_initialized", None)  # (a Ray still importing in a thread has none)
    if is_initialized is not None and is_initialized():
        sys.exit(code)
    if isinstance(code, str):  # what sys.exit would print
        print(code, file=sys.stderr)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)
