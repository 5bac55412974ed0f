"""Dedup's distributed connected components: the same components as scipy and as the union-find,
the same decisions on local and Ray (1 and 2 workers), and a fit killed between rounds resumes.

Truth for the components is scipy's `connected_components`; for the decisions, the local
executor's (the existing tests pin those to hand-checked and exhaustive results)."""

from __future__ import annotations

import os
import pickle
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from dataclean import columns as C
from dataclean.dedup.components import Components
from dataclean.dedup.connect import LabelNodes, Rounds, load_labels, run_rounds
from dataclean.dedup.partition import distinct_edges, write_edges
from dataclean.dedup.pieces import PIECE_EDGES, edge_pieces
from dataclean.executors.local import LocalExecutor
from dataclean.io.files import fresh_folder
from dataclean.stage import FitContext
from dataclean.stages.dedup import DropDuplicates
from tests.dedup.test_bounded_decisions import template_corpus
from tests.stages.test_dedup_stage import corpus, decisions, run

ROOT = Path(__file__).resolve().parents[2]


def graph(seed: int) -> tuple[int, np.ndarray]:
    """A random sparse graph (many small components), a long path and a clique, nodes shuffled."""
    rng = np.random.default_rng(seed)
    nodes = 3000
    random_edges = rng.integers(0, 1500, size=(900, 2))
    path = np.stack([np.arange(1500, 1900), np.arange(1501, 1901)], axis=1)
    clique = np.array([(a, b) for a in range(2000, 2020) for b in range(a + 1, 2020)])
    edges = np.concatenate([random_edges, path, clique])
    relabel = rng.permutation(nodes)  # the path's nodes out of order, as rows are in a corpus
    return nodes, relabel[edges]


def scipy_labels(nodes: int, edges: np.ndarray) -> np.ndarray:
    """Each node's component's smallest node, -1 for a node without an edge."""
    matrix = coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(nodes, nodes))
    _, component = connected_components(matrix, directed=False)
    smallest = np.full(component.max() + 1, nodes)
    np.minimum.at(smallest, component, np.arange(nodes))
    labels: np.ndarray = smallest[component]
    touched = np.zeros(nodes, dtype=bool)
    touched[edges.ravel()] = True
    alone = np.bincount(component, minlength=component.max() + 1)[component] == 1
    labels[~touched | alone] = -1  # without an edge, or touched by a self-loop only
    return labels


def distributed_labels(
    nodes: int, edges: np.ndarray, partitions: int, folder: Path, limit: int = PIECE_EDGES
) -> tuple[np.ndarray, int]:
    rounds = Rounds(str(folder / "components"), "test")
    first = rounds.begin(0)
    for number, part in enumerate(np.array_split(edges, 3)):  # three reduce tasks' worth of files
        write_edges(f"{first}/{number:05d}.arrow", part[:, 0], part[:, 1], partitions)
    rounds.finish(0, {})
    stars, count, _ = run_rounds(LocalExecutor(), rounds, partitions, limit)
    starts = (0, 1000, 1000, 2500)  # four summary files, one of them empty
    labeller = LabelNodes(stars, fresh_folder(str(folder / "labels")), starts, limit)
    LocalExecutor().map(labeller, range(partitions))
    files = tuple(labeller.path(p) for p in range(partitions))
    bounds = [*starts, nodes]
    parts = [load_labels(files, i, bounds[i], bounds[i + 1] - bounds[i]) for i in range(len(starts))]
    return np.concatenate(parts), count


@pytest.mark.parametrize("partitions", [1, 3, 4])
@pytest.mark.parametrize("seed", [0, 1])
def test_rounds_find_scipys_components_and_the_union_finds(
    partitions: int, seed: int, tmp_path: Path
) -> None:
    nodes, edges = graph(seed)
    found, count = distributed_labels(nodes, edges, partitions, tmp_path)
    assert np.array_equal(found, scipy_labels(nodes, edges))
    union_find = Components(nodes)
    union_find.add(edges[edges[:, 0] != edges[:, 1]])
    assert np.array_equal(found, union_find.labels())
    assert count > 2  # the path takes several rounds


def hub_graph(seed: int) -> tuple[int, np.ndarray]:
    """`graph` plus hubs: one node joined to a third of the nodes, and one in the middle of the
    numbering joined to a few hundred others, so that a hub's edges fill several pieces."""
    nodes, edges = graph(seed)
    rng = np.random.default_rng(seed + 10)
    hub, middle = rng.integers(0, nodes, size=2)
    spokes = rng.choice(nodes, size=nodes // 3, replace=False)
    more = rng.choice(nodes, size=300, replace=False)
    hubs = np.concatenate(
        [
            np.stack([np.full(len(spokes), hub), spokes], axis=1),
            np.stack([more, np.full(300, middle)], axis=1),
        ]
    )
    return nodes, np.concatenate([edges, hubs])


@pytest.mark.parametrize("limit", [600, 2500])
@pytest.mark.parametrize("partitions", [1, 3])
def test_rounds_reading_in_pieces_find_the_same_components(
    limit: int, partitions: int, tmp_path: Path
) -> None:
    """A hub's edges spread over many pieces of its partition: still scipy's components."""
    nodes, edges = hub_graph(partitions)
    found, _ = distributed_labels(nodes, edges, partitions, tmp_path, limit)
    assert np.array_equal(found, scipy_labels(nodes, edges))
    union_find = Components(nodes)
    union_find.add(edges[edges[:, 0] != edges[:, 1]])
    assert np.array_equal(found, union_find.labels())


@pytest.mark.parametrize("limit", [1, 5, 100, 10**6])
def test_pieces_are_the_partitions_distinct_edges_in_order(limit: int, tmp_path: Path) -> None:
    _, edges = hub_graph(0)
    paths = []
    for number, part in enumerate(np.array_split(edges, 4)):  # overlapping files: shared edges
        paths.append(str(tmp_path / f"{number}.arrow"))
        write_edges(
            paths[-1],
            np.concatenate([part[:, 0], edges[:50, 0]]),
            np.concatenate([part[:, 1], edges[:50, 1]]),
            3,
        )
    for partition in range(3):
        pieces = list(edge_pieces(tuple(paths), partition, limit))
        node = np.concatenate([piece[0] for piece in pieces])
        other = np.concatenate([piece[1] for piece in pieces])
        both_ways = np.concatenate([edges, edges[:, ::-1]])
        mine = both_ways[both_ways[:, 0] % 3 == partition]
        expected = distinct_edges(mine[:, 0], mine[:, 1])
        assert np.array_equal(node, expected[0]) and np.array_equal(other, expected[1])
        # No piece holds more than `limit` rows (or one row of each file, when there are more).
        assert all(len(piece[0]) <= max(limit, len(paths)) for piece in pieces)
        assert len(pieces) > 1 or limit >= len(both_ways)


def chain_corpus(chains: int = 3, length: int = 40, seed: int = 5) -> pa.Table:
    """Chains of documents, each 3% of words away from the one before: long, thin components
    (many rounds), whose decisions depend on keep order."""
    rng = random.Random(seed)
    vocabulary = [
        "".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(3, 8))) for _ in range(3000)
    ]
    ids, texts, ranks = [], [], []
    for chain in range(chains):
        words = [rng.choice(vocabulary) for _ in range(300)]
        for _ in range(length):
            for _ in range(9):
                words[rng.randrange(300)] = rng.choice(vocabulary)
            ids.append(f"c{chain}-{rng.randrange(10**6):06d}")
            texts.append(" ".join(words))
            ranks.append(float(rng.randrange(100)))
    order = list(range(len(ids)))
    rng.shuffle(order)
    return pa.table(
        {
            C.ID: [ids[i] for i in order],
            C.TEXT: [texts[i] for i in order],
            C.PPL: [ranks[i] for i in order],
        }
    )


CASES: list[tuple[str, Any, dict[str, Any], int]] = [
    ("copies", corpus, {}, 3),
    ("chains", chain_corpus, {}, 4),
    ("chains, keep=-ppl", chain_corpus, {"keep": "-ppl"}, 2),
    ("template, keep=longest", lambda: template_corpus(120, 350, 150, copies=10), {"keep": "longest"}, 3),
]


def test_local_and_ray_with_one_and_two_workers_decide_alike(tmp_path: Path, ray_executor: Any) -> None:
    from dataclean.executors.ray import RayExecutor

    one_worker = RayExecutor(workers=1)  # the session's Ray, one task at a time (other partitions)
    assert one_worker.workers == 1 and ray_executor.workers == 2
    for number, (name, make, params, shards) in enumerate(CASES):
        table = make()
        folder = tmp_path / str(number)
        folder.mkdir()
        local = decisions(run(DropDuplicates(**params), table, folder, shards=shards, by_shard=True))
        assert any(reason for reason, _ in local.values()), name
        for executor in (one_worker, ray_executor):
            remote = run(DropDuplicates(**params), table, folder, shards, executor, by_shard=True)
            assert decisions(remote) == local, (name, executor.workers)


KILLER = textwrap.dedent(
    """
    import os, pickle, signal, sys
    from dataclean.dedup.connect import StarRound
    from dataclean.executors.local import LocalExecutor
    from dataclean.stage import FitContext

    class KilledBeforeRound(LocalExecutor):
        # A fit whose process dies (SIGKILL, nothing cleaned up) as round 3 is about to start.
        def map(self, fn, items, on_result=None, light=False):
            if isinstance(fn, StarRound) and fn.folder.endswith("step-003"):
                os.kill(os.getpid(), signal.SIGKILL)
            return super().map(fn, items, on_result, light)

    stage, summaries, scratch = pickle.load(open(sys.argv[1], "rb"))
    stage.fit(FitContext(summaries, scratch, KilledBeforeRound(), list(range(len(summaries)))))
    """
)


def test_a_fit_killed_between_rounds_resumes_after_the_last_complete_round(tmp_path: Path) -> None:
    table = chain_corpus()
    summaries = []
    for number, piece in enumerate([table.slice(0, 60), table.slice(60)]):
        path = str(tmp_path / f"summary-{number}.parquet")
        pq.write_table(DropDuplicates().observe(piece), path)
        summaries.append(path)
    whole = DropDuplicates()
    whole.fit(FitContext(summaries, str(tmp_path / "whole"), LocalExecutor(), [0, 1]))
    assert whole.fit_stats["component_rounds"] > 3 and whole.fit_stats["resumed_from_round"] is None

    scratch = str(tmp_path / "killed")
    arguments = tmp_path / "arguments.pickle"
    arguments.write_bytes(pickle.dumps((DropDuplicates(), summaries, scratch)))
    script = tmp_path / "killer.py"
    script.write_text(KILLER)
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    killed = subprocess.run(
        [sys.executable, str(script), str(arguments)], env=environment, cwd=ROOT, check=False
    )
    assert killed.returncode == -9
    assert (Path(scratch) / "components" / "step-002" / "done.json").exists()
    assert not (Path(scratch) / "components" / "step-003" / "done.json").exists()

    resumed = DropDuplicates()
    resumed.fit(FitContext(summaries, scratch, LocalExecutor(), [0, 1]))
    assert resumed.fit_stats["resumed_from_round"] == 2
    assert resumed.fit_stats["component_rounds"] == whole.fit_stats["component_rounds"]
    for stage in (whole, resumed):  # as shipped to workers
        stage.begin_shard(None)
    assert decisions(pickle.loads(pickle.dumps(resumed))(table)) == decisions(
        pickle.loads(pickle.dumps(whole))(table)
    )
    # counted before the kill (step 0's statistics come from its done marker)
    assert resumed.fit_stats["edges"] == whole.fit_stats["edges"]
