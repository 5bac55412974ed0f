"""The embedded Ray executor: quick to start (short node wait, no idle processes) and to stop, and
Ray as it was when the private API it uses fails."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_embedded_ray_starts_without_idle_processes_and_close_stops_every_process() -> None:
    # A fresh process: the tests' shared Ray (conftest) must not be the one stopped here.
    script = textwrap.dedent(
        """
        import psutil
        from ray._private import node, ray_constants, worker
        from dataclean.executors.ray import RayExecutor

        original = (node.Node.__init__, node.Node.start_api_server)
        executor = RayExecutor(workers=1)
        assert executor.map(abs, [-3]) == [3]
        started = worker._global_node.all_processes
        for kind in (
            ray_constants.PROCESS_TYPE_MONITOR,
            ray_constants.PROCESS_TYPE_LOG_MONITOR,
            ray_constants.PROCESS_TYPE_DASHBOARD,
        ):
            assert kind not in started, (kind, sorted(started))
        assert {ray_constants.PROCESS_TYPE_RAYLET, ray_constants.PROCESS_TYPE_GCS_SERVER} <= set(started)
        commands = [" ".join(p.cmdline()) for p in psutil.Process().children(recursive=True)]
        for script in ("log_monitor.py", "autoscaler/_private/monitor.py", "dashboard/dashboard.py"):
            assert not any(script in command for command in commands), (script, commands)
        assert (node.Node.__init__, node.Node.start_api_server) == original  # Ray as it was
        executor.close()
        children = psutil.Process().children(recursive=True)
        left = [p for p in children if p.is_running() and p.status() != "zombie"]
        assert not left, left
        print("ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]


def _run_script(script: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]


def test_embedded_start_waits_for_its_node_in_short_steps_and_restores_ray() -> None:
    _run_script(
        """
        from ray._private import services
        from dataclean.executors import ray_startup
        from dataclean.executors.ray import RayExecutor

        original, waits = services.get_node, []
        wait = ray_startup._wait_until_registered
        ray_startup._wait_until_registered = lambda *args: waits.append(args) or wait(*args)
        executor = RayExecutor(workers=1)
        assert len(waits) == 1, waits  # Ray asked for its new node through the short wait
        assert services.get_node is original  # and gets Ray's own function back
        assert executor.map(abs, [-2, 5]) == [2, 5]
        executor.close()
        print("ok")
        """
    )


def test_embedded_start_falls_back_to_rays_own_wait_when_the_short_one_fails() -> None:
    _run_script(
        """
        import ray._raylet
        from dataclean.executors.ray import RayExecutor

        def broken(*args, **kwargs):
            raise RuntimeError("no GCS client here")

        ray._raylet.GcsClient = broken
        executor = RayExecutor(workers=1)
        assert executor.map(abs, [-4]) == [4]
        executor.close()
        print("ok")
        """
    )


def test_an_embedded_ray_listens_on_loopback_only_with_token_authentication() -> None:
    # Every listening socket of the run's processes (driver, GCS, raylet, agents, workers).
    _run_script(
        """
        import ipaddress
        import psutil
        from ray._raylet import AuthenticationMode, get_authentication_mode
        from dataclean.executors.ray import RayExecutor

        executor = RayExecutor(workers=2)
        assert sorted(executor.map(abs, [-1, -2, -3, -4])) == [1, 2, 3, 4]
        pids = {p.pid: p.name() for p in [psutil.Process(), *psutil.Process().children(recursive=True)]}
        listening = [
            (pids[c.pid], c.laddr.ip)
            for c in psutil.net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN and c.pid in pids
        ]

        def loopback(ip):
            address = ipaddress.ip_address(ip)
            mapped = getattr(address, "ipv4_mapped", None)
            return (mapped or address).is_loopback

        names = {name for name, _ in listening}
        assert {"gcs_server", "raylet"} <= names and len(listening) >= 4, listening
        assert all(loopback(ip) for _, ip in listening), listening
        assert get_authentication_mode() == AuthenticationMode.TOKEN
        executor.close()
        print("ok")
        """
    )
