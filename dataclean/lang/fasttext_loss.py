"""fastText's output layers at predict time: label probabilities from hidden vectors.

`label_probabilities` turns the hidden vectors `dataclean.lang.fasttext.hidden_vectors` computes
into what fastText's `predict` returns (fastText C++ 0.9, `Loss::predict` and `findKBest`), for
each loss a supervised model can be trained with:
- hierarchical softmax (`-loss hs`): a label's probability is the product of the sigmoids along
  its path in the Huffman tree of the label counts, each step's log taken as fastText does
  (`log(x + 1e-5)`), the sigmoid computed exactly (`HierarchicalSoftmaxLoss::dfs`);
- softmax (`-loss softmax`): a softmax over the output rows, shifted by the largest score;
- one-vs-all and negative sampling (`-loss ova`, `-loss ns`): each label's own sigmoid, read from
  fastText's 512-entry table over [-8, 8] (`Loss::sigmoid`), as `BinaryLogisticLoss` does.
For softmax and the sigmoid losses the probability `predict` reports is exp(log(p + 1e-5)) in
float32 (the log kept in its heap, exponentiated on the way out), so that is what is returned.
"""

# numba kernels compute on numpy scalars, which mypy sees as Any here.
# mypy: disable-error-code="no-any-return"

from __future__ import annotations

import math

import numba as nb
import numpy as np

from dataclean.jit import helper
from dataclean.lang.model_file import LOSS_HS, LOSS_SOFTMAX, FastTextModel

_MAX_SIGMOID = 8
_SIGMOID_TABLE_SIZE = 512


def _sigmoid_table() -> np.ndarray:
    """fastText's `t_sigmoid_`: x = float(i * 16) / 512 - 8 in float32, then 1 / (1 + expf(-x))
    in double, stored as float32 (expf: the float32 exponential, correctly rounded)."""
    table = np.empty(_SIGMOID_TABLE_SIZE + 1, np.float32)
    for i in range(_SIGMOID_TABLE_SIZE + 1):
        x = np.float32(np.float32(i * 2 * _MAX_SIGMOID) / np.float32(_SIGMOID_TABLE_SIZE)) - np.float32(8)
        table[i] = 1.0 / (1.0 + float(np.float32(math.exp(-float(x)))))
    return table


_SIGMOIDS = _sigmoid_table()


@helper
def _dot(output: np.ndarray, row: int, hidden: np.ndarray) -> np.float32:
    """fastText's `DenseMatrix::dotRow`: a float32 sum in order."""
    f = np.float32(0.0)
    for d in range(hidden.shape[0]):
        f += output[row, d] * hidden[d]
    return f


@helper
def _sigmoid_logs(output: np.ndarray, row: int, hidden: np.ndarray) -> tuple[np.float32, np.float32]:
    """fastText's log(1 - f + 1e-5) and log(f + 1e-5) for f = sigmoid(output[row] . hidden)."""
    f = _dot(output, row, hidden)
    f = np.float32(1.0 / (np.float32(1.0) + np.exp(-f)))
    left = np.float32(np.log(np.float64(np.float32(1.0 - np.float64(f))) + 1e-5))
    right = np.float32(np.log(np.float64(f) + 1e-5))
    return left, right


@helper
def _reported(p: np.float32) -> np.float32:
    """What `predict` reports for a probability it keeps as log(p + 1e-5): exp of that log."""
    return np.exp(np.float32(np.log(np.float64(p) + 1e-5)))


@nb.njit(cache=True, nogil=True)
def _tree_kernel(
    hiddens: np.ndarray,
    output: np.ndarray,
    tree_left: np.ndarray,
    tree_right: np.ndarray,
    tree_parent: np.ndarray,
    wanted: np.ndarray,
    top: np.ndarray,
    top_prob: np.ndarray,
    wanted_prob: np.ndarray,
    stack_node: np.ndarray,
    stack_score: np.ndarray,
    path: np.ndarray,
) -> None:
    """Hierarchical softmax: the top label and its probability (fastText's depth-first search with
    k=1, pruned below the best leaf so far), and the probability of each `wanted` label, into
    top, top_prob and wanted_prob; the stacks and path are scratch (`_tree_predict`)."""
    n = hiddens.shape[0]
    osz = (len(tree_left) + 1) // 2
    root = 2 * osz - 2
    for t in range(n):
        hidden = hiddens[t]
        best, best_score = -1, np.float32(-np.inf)
        depth = 0
        stack_node[0], stack_score[0] = root, np.float32(0.0)
        depth = 1
        while depth > 0:
            depth -= 1
            node, score = stack_node[depth], stack_score[depth]
            if best >= 0 and score < best_score:
                continue
            if tree_left[node] == -1:
                if best < 0 or score > best_score:
                    best, best_score = node, score
                continue
            left, right = _sigmoid_logs(output, node - osz, hidden)
            # Right is pushed first so that the left subtree is searched first, as fastText does.
            stack_node[depth], stack_score[depth] = tree_right[node], score + right
            stack_node[depth + 1], stack_score[depth + 1] = tree_left[node], score + left
            depth += 2
        top[t], top_prob[t] = best, np.exp(best_score)
        for w in range(len(wanted)):
            steps = 0
            node = wanted[w]
            while tree_parent[node] >= 0:
                path[steps] = node
                steps += 1
                node = tree_parent[node]
            score = np.float32(0.0)
            for s in range(steps - 1, -1, -1):
                child = path[s]
                parent = tree_parent[child]
                left, right = _sigmoid_logs(output, parent - osz, hidden)
                score = score + (right if tree_right[parent] == child else left)
            wanted_prob[t, w] = np.exp(score)


def _tree_predict(
    hiddens: np.ndarray, model: FastTextModel, wanted: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`_tree_kernel` with its arrays: (top label, its probability, wanted labels' probabilities)."""
    n, nodes = hiddens.shape[0], len(model.tree_left) + 1
    top, top_prob = np.zeros(n, np.int32), np.zeros(n, np.float32)
    wanted_prob = np.zeros((n, len(wanted)), np.float32)
    tree = (model.tree_left, model.tree_right, model.tree_parent)
    scratch = (np.zeros(nodes, np.int64), np.zeros(nodes, np.float32), np.zeros(nodes, np.int64))
    _tree_kernel(hiddens, model.output, *tree, wanted, top, top_prob, wanted_prob, *scratch)
    return top, top_prob, wanted_prob


@nb.njit(cache=True, nogil=True)
def _softmax_kernel(hiddens: np.ndarray, output: np.ndarray, probs: np.ndarray) -> None:
    """`SoftmaxLoss::computeOutput`, then what `predict` reports, into probs [texts, labels]."""
    nlabels = output.shape[0]
    for t in range(hiddens.shape[0]):
        hidden = hiddens[t]
        best = np.float32(-np.inf)
        for label in range(nlabels):
            f = _dot(output, label, hidden)
            probs[t, label] = f
            best = max(best, f)
        total = np.float32(0.0)
        for label in range(nlabels):
            # The double exp, rounded to float32: fastText's unqualified `exp` here is the C one
            # (measured: expf differs in about 1 of 150 rows; its `predict` then takes expf).
            probs[t, label] = np.float32(np.exp(np.float64(probs[t, label] - best)))
            total += probs[t, label]
        for label in range(nlabels):
            probs[t, label] = _reported(probs[t, label] / total)


@nb.njit(cache=True, nogil=True)
def _sigmoid_kernel(hiddens: np.ndarray, output: np.ndarray, table: np.ndarray, probs: np.ndarray) -> None:
    """`BinaryLogisticLoss::computeOutput` (each label's tabled sigmoid), then what `predict`
    reports, into probs [texts, labels]."""
    for t in range(hiddens.shape[0]):
        hidden = hiddens[t]
        for label in range(output.shape[0]):
            x = _dot(output, label, hidden)
            if x < -_MAX_SIGMOID:
                p = np.float32(0.0)
            elif x > _MAX_SIGMOID:
                p = np.float32(1.0)
            else:
                # (x + 8) * 512 / 8 / 2, each step in float32 as the C++ evaluates it.
                scaled = np.float32(x + np.float32(_MAX_SIGMOID)) * np.float32(_SIGMOID_TABLE_SIZE)
                index = np.float32(np.float32(scaled) / np.float32(_MAX_SIGMOID)) / np.float32(2)
                p = table[np.int64(np.float32(index))]
            probs[t, label] = _reported(p)


def label_probabilities(
    hiddens: np.ndarray, model: FastTextModel, wanted: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(top label per text, its probability, the probability of each `wanted` label index) as
    fastText's `predict` reports them; hiddens float32 [texts, dim]."""
    if model.loss == LOSS_HS:
        return _tree_predict(hiddens, model, wanted)
    probs = np.zeros((hiddens.shape[0], model.output.shape[0]), np.float32)
    if model.loss == LOSS_SOFTMAX:
        _softmax_kernel(hiddens, model.output, probs)
    else:
        _sigmoid_kernel(hiddens, model.output, _SIGMOIDS, probs)
    # fastText's k-best heap keeps the last of equal probabilities (saturated sigmoids tie at 1).
    last = probs.shape[1] - 1 - probs[:, ::-1].argmax(axis=1) if probs.shape[1] else np.zeros(len(probs))
    top = last.astype(np.int32)
    top_prob = probs[np.arange(len(top)), top] if probs.shape[1] else np.zeros(len(probs), np.float32)
    return top, top_prob, probs[:, wanted]
