"""Start and stop of an embedded Ray: two waits in Ray's own code, each shortened safely; loopback
only; a quiet start.

These use Ray's private API (checked with Ray 2.60); if it is not there (another Ray version), or
anything about it fails, Ray starts and stops exactly as it would without them, only slower (or,
for `loopback_only`, listening where Ray chooses: see docs/security.md).

- `quick_node_wait`: while `ray.init` starts a local cluster, it asks the GCS for the new node once
  a second until the raylet has registered (`ray._private.services.get_node`). The raylet
  registers about 0.6 s after it starts, so `ray.init` took 2.4 s or 3.4 s depending on where
  the poll fell; asking every 20 ms first makes it about 2.0 s (measured here, 6 starts each).
- `loopback_only`: not a wait, but what a run on one machine should be: a new local Ray takes
  127.0.0.1 as its node address, so its GCS, raylet, object manager and workers listen on the
  loopback interface only (otherwise on every interface: `*:PORT`). Ray does this by itself on
  macOS and Windows (`ray_constants.ENABLE_RAY_CLUSTER`, `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`);
  on Linux it picks the machine's network address. Token authentication stays on either way.
- `quiet_start_notices`: a new local Ray turns token authentication on (as it should) and logs a
  warning saying so on every start, a second line around the run's own one-line error or summary.
  Authentication stays on; only that notice is filtered, and only while the embedded Ray starts.
  Started in a thread (`dataclean.run.session`), `ray.init` also warns that it set no SIGTERM handler:
  `exit_on_sigterm` sets the same one from the main thread, and that notice is filtered too.
- `without_idle_processes`: a local Ray starts three Python processes that an embedded, one-node,
  dashboard-less run never uses: the log monitor (it streams workers' output to the driver, which
  `log_to_driver=False` turns off anyway), the autoscaler monitor (one node, nothing to scale)
  and the API server (`dashboard.py --minimal`: the job and state APIs, for `ray job` and
  `ray list`). Each imports Ray on its own: 1.5 CPU-seconds of the 4.3 a start took here
  (measured with psutil on an idle 2-core machine), on the cores the run's first shards need.
  Within the block Ray starts without them; the GCS, raylet, its two agents and the workers
  start as before.
- `stop_autoscaler_monitor`: the autoscaler monitor ignores SIGTERM, so `ray.shutdown` waits out
  its whole one-second grace period for it before killing it anyway (1.01 of the 1.11 s
  shutdown). On a one-node embedded cluster it has no state to save.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

log = logging.getLogger(__name__)
POLL_SECONDS = 0.02
NODE_WAIT_SECONDS = 30.0  # Ray's own limit for the raylet to register


@contextlib.contextmanager
def quick_node_wait() -> Iterator[None]:
    """Within this block, a starting local Ray waits for its node in 20 ms steps, not 1 s."""
    try:
        from ray._private import services

        original: Callable[[str, str], Any] = services.get_node
    except Exception as error:  # another Ray: start the ordinary way
        log.debug("Ray's node wait left as it is: %s", error)
        yield
        return

    def get_node(gcs_address: str, node_id: str) -> Any:
        _wait_until_registered(gcs_address, node_id)
        return original(gcs_address, node_id)  # now answers at once, or fails as Ray would

    services.get_node = get_node
    try:
        yield
    finally:
        services.get_node = original


@contextlib.contextmanager
def loopback_only() -> Iterator[None]:
    """Within this block, a starting local Ray listens on 127.0.0.1 only (module docstring)."""
    try:
        from ray._private import ray_constants

        original = ray_constants.ENABLE_RAY_CLUSTER
    except Exception as error:  # another Ray: it listens where it does (docs/security.md)
        log.debug("Ray's node address left as it is: %s", error)
        yield
        return
    ray_constants.ENABLE_RAY_CLUSTER = False  # services.get_node_ip_address -> 127.0.0.1
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = original


@contextlib.contextmanager
def without_idle_processes() -> Iterator[None]:
    """Within this block, a starting local Ray runs no log monitor, autoscaler monitor or API
    server (module docstring)."""
    try:
        from ray._private import node

        original_init = node.Node.__init__
        original_api = node.Node.start_api_server
    except Exception as error:  # another Ray: it starts them
        log.debug("Ray's optional processes left as they are: %s", error)
        yield
        return

    def init(self: Any, ray_params: Any, *args: Any, **kwargs: Any) -> None:
        ray_params.include_log_monitor = False
        ray_params.no_monitor = True
        original_init(self, ray_params, *args, **kwargs)

    def start_api_server(self: Any, **kwargs: Any) -> None:
        return None

    node.Node.__init__ = init  # type: ignore[method-assign]
    node.Node.start_api_server = start_api_server  # type: ignore[method-assign]
    try:
        yield
    finally:
        node.Node.__init__ = original_init  # type: ignore[method-assign]
        node.Node.start_api_server = original_api  # type: ignore[method-assign]


# (logger, the start of the one message filtered from it while an embedded Ray starts)
_START_NOTICES = (
    ("ray._private.authentication.authentication_token_setup", "Token authentication is enabled"),
    ("ray._private.worker", "SIGTERM handler is not set"),
)


class _Notice(logging.Filter):
    def __init__(self, start: str) -> None:
        super().__init__()
        self.start = start

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.start)


@contextlib.contextmanager
def quiet_start_notices() -> Iterator[None]:
    """Within this block, two of Ray's start-up warnings are not logged (see the module
    docstring); every other message of those loggers is."""
    filters = [(logging.getLogger(name), _Notice(start)) for name, start in _START_NOTICES]
    for logger, notice in filters:
        logger.addFilter(notice)
    try:
        yield
    finally:
        for logger, notice in filters:
            logger.removeFilter(notice)


def exit_on_sigterm() -> None:
    """What `ray.init` does in the main thread, for a Ray started in another one: SIGTERM ends
    the driver by `sys.exit`, so that its exit hooks stop the embedded Ray. Only from the main
    thread, and only where SIGTERM still has its default action."""
    main = threading.current_thread() is threading.main_thread()
    if main and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))


def _wait_until_registered(gcs_address: str, node_id: str) -> None:
    try:
        from ray._raylet import GcsClient  # type: ignore[attr-defined]

        client = GcsClient(address=gcs_address)
        deadline = time.monotonic() + NODE_WAIT_SECONDS
        while time.monotonic() < deadline:
            if any(key.hex() == node_id for key in client.get_all_node_info(timeout=5)):
                return
            time.sleep(POLL_SECONDS)
    except Exception as error:  # Ray's own wait takes over
        log.debug("quick node wait gave up: %s", error)


def stop_autoscaler_monitor() -> None:
    """Kill the embedded cluster's autoscaler monitor before `ray.shutdown` (see the module
    docstring)."""
    try:
        from ray._private import ray_constants, worker

        node = worker._global_node
        if node is not None:
            node._kill_process_type(ray_constants.PROCESS_TYPE_MONITOR, check_alive=False)
    except Exception as error:  # never fail a finished run over a faster shutdown
        log.debug("autoscaler monitor not stopped early: %s", error)
