"""A run on fresh cluster nodes against the same run on the same nodes once warm.

Starts two `ray start` nodes on this machine, each with its own temp dir and kernel cache
(`tests/run/local_cluster.py`: as two machines that share nothing but the output folder), runs
`dataclean run INPUT -o OUT --address HEAD` `--runs` times into new output folders, and prints each
run's wall seconds and its lines about the nodes' kernels. The first run finds both nodes fresh
(each says `node N: compiling kernels, first time on this node`); the later ones find them warm
and say nothing, unless dataclean's source files changed in between (the cache's note is keyed
by them). The driver's own cache is the user's. Stops exactly the processes it started.

    python benchmarks/bench_cluster_kernels.py [--runs 2] [--cpus 1] [--pipeline default] [INPUT]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.run.local_cluster import LocalCluster  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input", nargs="?", default=str(ROOT / "dataclean" / "data" / "sample"))
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--cpus", type=int, default=1, help="CPUs of each of the two nodes")
    parser.add_argument("--pipeline", default="default")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as folder:
        root = Path(folder)
        started = time.perf_counter()
        with LocalCluster(root, nodes=2, cpus=args.cpus) as cluster:
            print(f"cluster of 2 nodes x {args.cpus} CPU up in {time.perf_counter() - started:.1f} s")
            for run in range(1, args.runs + 1):
                output = str(root / f"out{run}")
                command = [sys.executable, "-m", "dataclean", "run", args.input, "-o", output]
                command += ["--pipeline", args.pipeline, "--address", cluster.address]
                started = time.perf_counter()
                done = subprocess.run(command, cwd=ROOT, env=cluster.env(), capture_output=True, text=True)
                seconds = time.perf_counter() - started
                print(f"run {run}: exit {done.returncode}, {seconds:.1f} s")
                for line in done.stderr.splitlines():
                    if "node " in line or done.returncode != 0:
                        print(f"    {line}")


if __name__ == "__main__":
    main()
