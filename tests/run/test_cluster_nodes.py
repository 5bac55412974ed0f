"""A run on a 2-node Ray cluster started with `ray start`, each node with its own kernel cache (as
on separate machines): each fresh node says it compiles, the output equals the local executor's,
and the piped stderr is one clean log even when Ray has something to say (a worker killed).

One run serves both tests (the cluster and the run take most of a minute on 2 busy cores).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dataclean.executors.local import LocalExecutor
from dataclean.run import run_pipeline
from dataclean.run.recipes import load_recipe
from tests.conftest import FIXTURE_ROOT, PROGRESS_LINE, ROOT, SAMPLE
from tests.run.local_cluster import LocalCluster
from tests.run.test_faults import _same_output

RECIPE = FIXTURE_ROOT / "crash_once_recipe.py"
COMPILING = re.compile(r"node (\d): compiling kernels, first time on this node, about \d+ s")


@dataclass
class ClusterRun:
    code: int
    stderr: str
    output: Path
    marker: Path


@pytest.fixture(scope="module")
def cluster_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterRun]:
    root = tmp_path_factory.mktemp("cluster")
    with LocalCluster(root, nodes=2, cpus=1) as cluster:
        env = cluster.env()  # the driver's cache is the user's: the nodes' are their own
        env["CRASH_MARKER"] = str(root / "crashed")
        output = root / "out"
        command = [sys.executable, "-m", "dataclean", "run", str(SAMPLE), "-o", str(output)]
        command += ["--pipeline", str(RECIPE), "--address", cluster.address]
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
        yield ClusterRun(done.returncode, done.stderr, output, root / "crashed")
    assert not cluster.processes(), "the cluster's processes outlived it"


def test_each_fresh_node_says_it_compiles_and_the_output_equals_local(
    cluster_run: ClusterRun, tmp_path: Path
) -> None:
    assert cluster_run.code == 0, cluster_run.stderr
    said = COMPILING.findall(cluster_run.stderr)
    assert sorted(said) == ["1", "2"], cluster_run.stderr  # each node once
    # Each node that finished before the run ended says so (a run may end first: then it does not).
    finished = re.findall(r"node (\d): kernels compiled in [\d.]+ s", cluster_run.stderr)
    assert len(finished) == len(set(finished)) and set(finished) <= {"1", "2"}
    assert (
        "compiling kernels: first run only" not in cluster_run.stderr
    )  # the driver's cache is not the nodes'
    assert cluster_run.marker.exists()  # a Ray worker really died, and its task was retried
    os.environ.pop("CRASH_MARKER", None)
    reference = tmp_path / "local"
    run_pipeline([str(SAMPLE)], str(reference), load_recipe(str(RECIPE)), LocalExecutor())
    _same_output(reference, cluster_run.output)


def test_piped_stderr_is_stamped_plain_and_says_each_progress_line_once(cluster_run: ClusterRun) -> None:
    lines = cluster_run.stderr.splitlines()
    assert lines, "nothing on stderr"
    unstamped = [line for line in lines if not PROGRESS_LINE.match(line)]
    assert not unstamped, unstamped
    assert "\x1b" not in cluster_run.stderr
    assert any("(raylet)" in line for line in lines), cluster_run.stderr  # Ray's own lines, stamped
    # The same group line twice at the same moment (a stalled group repeats its counts every 10 s,
    # each time with its own stamp).
    progress = [line for line in lines if re.search(r": \d+/\d+ shards", line)]
    assert len(progress) == len(set(progress)), progress
