"""fastText's linear output layers folded into the input rows: a classifier's fast path.

Softmax and hierarchical softmax start from a linear function of the hidden vector: label (or
tree node) k's score is output[k] . hidden, and hidden is the mean of the text's input rows. So
score k is also the mean, over the same rows, of row . output[k]. `projected_model` computes that
dot product for every input row once per model: a table of a column per label but one
(`_project`; for a DCLM-shaped classifier 4 bytes a row, where the rows themselves are 400),
which the same kernel (`dataclean.lang.fasttext.hidden_vectors`) averages instead of the rows.
Its output matrix is the identity, so the output layer (`dataclean.lang.fasttext_loss`) reads
each score as it is (a dot product with a unit vector is exact) and applies fastText's own
nonlinearity to it.

Why: for a word-bigram classifier, adding up each text's 100-float rows of tokens and word
bigrams, scattered over hundreds of MB, was about 60% of the time, at the memory's speed
(`benchmarks/bench_classify.py`). The table is float32 (each entry rounded once from its float64
dot product) and its sums are float64: summed in float32 it was measured 2e-6 away from
fastText's probabilities on the benchmark's corpus; summed in float64, 3e-7, the same as a
float64 table (4% slower, twice the memory), and that is fastText's own float32 rounding
(fastText is 3e-7 away from the float64 truth, this path 7e-8). So the probabilities are
fastText's to its rounding, not bit for bit: `predict(..., exact=True)` is the bit-for-bit path.
It is used where the table is at most half the rows' size and the nonlinearity is smooth
(`projection_pays`): not for lid.176 (176 labels over 16 dimensions), nor for the tabled sigmoid
of one-vs-all and negative sampling.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref

import numpy as np

from dataclean.lang.model_file import LOSS_HS, LOSS_SOFTMAX, FastTextModel

# Input rows projected per step: a chunk's float64 copy stays small (16k x dim x 8 bytes).
_CHUNK_ROWS = 1 << 14

# id(model) -> (the model, weakly: an id is reused once its object is gone; its projected model).
_projected: dict[int, tuple[weakref.ref[FastTextModel], FastTextModel]] = {}
_lock = threading.Lock()


def projection_pays(model: FastTextModel) -> bool:
    """Whether the model is scored through its projected rows: a softmax or hierarchical-softmax
    model of two labels or more whose projected row (`_project`: a float32 per label but one) is
    at most half its input row (dim float32). Not the sigmoid losses (one-vs-all, negative
    sampling): fastText reads their sigmoid from a table in steps of 1/32, so a score a rounding
    away from a step's edge would move a whole step."""
    outputs, dim = model.output.shape
    return model.loss in (LOSS_SOFTMAX, LOSS_HS) and outputs >= 2 and (outputs - 1) * 2 <= dim


def _project(model: FastTextModel) -> FastTextModel:
    """The table, with one column fewer than the output rows: a softmax is the same when every
    score is shifted by the same amount, so the last label's score is subtracted from every
    other's (it becomes 0); a hierarchical softmax's last output row is no tree node (a tree of
    n labels has n - 1 inner nodes). A binary classifier's table is then one float32 a row."""
    output = model.output.astype(np.float64)
    columns = output[:-1] - output[-1] if model.loss == LOSS_SOFTMAX else output[:-1]
    table = np.empty((model.rows.shape[0], len(columns)), np.float32)
    for start in range(0, len(table), _CHUNK_ROWS):
        chunk = model.rows[start : start + _CHUNK_ROWS].astype(np.float64)
        table[start : start + len(chunk)] = chunk @ columns.T
    # Output row k reads score k; the last (the softmax's last label) reads 0.
    unit = np.eye(len(output), len(columns), dtype=np.float32)
    return dataclasses.replace(model, rows=table, output=unit)


def projected_model(model: FastTextModel) -> FastTextModel:
    """`model` with each input row replaced by its dot product with every output row, and an
    identity output matrix (module docstring); built once per model and process. A model for
    which the projection does not pay (`projection_pays`) is returned as it is."""
    if not projection_pays(model):
        return model
    with _lock:
        found = _projected.get(id(model))
        if found is None or found[0]() is not model:
            found = (weakref.ref(model), _project(model))
            _projected[id(model)] = found
            weakref.finalize(model, _projected.pop, id(model), None)  # forgotten with the model
        return found[1]
