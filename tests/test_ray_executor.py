"""The embedded Ray executor shuts down without waiting on Ray's autoscaler monitor."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_close_stops_the_autoscaler_monitor_and_every_ray_process() -> None:
    # A fresh process: the tests' shared Ray (conftest) must not be the one stopped here.
    script = textwrap.dedent(
        """
        import psutil
        from ray._private import ray_constants, worker
        from dataclean.executors.ray import RayExecutor, _stop_autoscaler_monitor

        executor = RayExecutor(workers=1)
        assert executor.map(abs, [-3]) == [3]
        [monitor] = worker._global_node.all_processes[ray_constants.PROCESS_TYPE_MONITOR]
        _stop_autoscaler_monitor()
        assert monitor.process.poll() is not None, "the monitor is still running"
        executor.close()
        children = psutil.Process().children(recursive=True)
        left = [p for p in children if p.is_running() and p.status() != "zombie"]
        assert not left, left
        print("ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]
