"""Long n-gram runs: a pattern of 1-13 units repeated 32 or more times in a row (OLMo's rule).

OLMo 2 traced its loss spikes to documents holding long runs of a repeated n-gram and masks them;
here such a run is found on the document's words (`dataclean.quality.tokenizer`; every Han
character is a word in the Chinese rules, so "的的的..." is a run of one unit) and on the
characters inside one long word ("hahaha...", "aaaa..."). The pattern must hold a letter or a
digit: separator lines ("-----", "=====") are layout, not degenerate text.

`_find_runs` reports each run's span of code points and where the text is cut back to its first
`KEEP` repetitions; the quality stage drops a document whose runs cover more than
`long_run_fraction` of its characters (`quality:long_ngram_run`) and cuts the runs out of the
others, keeping the good text around them.
"""

# numba kernels compute on numpy scalars, which mypy sees as Any here.
# mypy: disable-error-code="no-any-return"

from __future__ import annotations

import numpy as np

from dataclean.jit import helper
from dataclean.quality import chars as F

MAX_PERIOD = 13
MIN_REPEATS = 32
KEEP = 3  # repetitions of a run left in the text when it is cut back


@helper
def _has_letter(cps, s, e, flags):  # type: ignore[no-untyped-def]
    for i in range(s, e):
        c = cps[i]
        if (flags[c] & F.IS_ALPHA) or 48 <= c <= 57:
            return True
    return False


@helper
def _add_cut(cuts, n_cuts, doc, start, end, run_start, run_end):  # type: ignore[no-untyped-def]
    """Row `n_cuts` of `cuts`: document, cut span, the whole run's span."""
    if n_cuts < len(cuts):
        cuts[n_cuts, 0] = doc
        cuts[n_cuts, 1] = start
        cuts[n_cuts, 2] = max(start, end)
        cuts[n_cuts, 3] = run_start
        cuts[n_cuts, 4] = run_end
        n_cuts += 1
    return n_cuts


@helper
def word_runs(cps, tokens, count, wh, flags, doc, cuts, n_cuts):  # type: ignore[no-untyped-def]
    """Runs over the words (`wh`: their hashes): (characters covered, new cut count). Each run is
    cut from the end of its `KEEP`-th repetition to the end of its last whole one."""
    covered = 0
    i = 0
    while i < count:
        best_period = 0
        best_end = i
        for period in range(1, MAX_PERIOD + 1):
            if i + period >= count:
                break
            j = i + period
            while j < count and wh[j] == wh[j - period]:
                j += 1
            # words i .. j-1 repeat the pattern wh[i:i+period]
            if (j - i) // period >= MIN_REPEATS and j > best_end:
                best_period, best_end = period, j
        if best_period and _has_letter(cps, tokens[i, 0], tokens[i + best_period - 1, 1], flags):
            whole = i + (best_end - i) // best_period * best_period
            covered += tokens[best_end - 1, 1] - tokens[i, 0]
            n_cuts = _add_cut(
                cuts, n_cuts, doc, tokens[i + KEEP * best_period - 1, 1], tokens[whole - 1, 1],
                tokens[i, 0], tokens[best_end - 1, 1],
            )  # fmt: skip
            i = best_end
        else:
            i += 1
    return covered, n_cuts


@helper
def char_runs(cps, s, e, flags, doc, cuts, n_cuts):  # type: ignore[no-untyped-def]
    """Runs of characters inside the word `cps[s:e]`: (characters covered, new cut count)."""
    covered = 0
    i = s
    while i + MIN_REPEATS <= e:
        best_period = 0
        best_end = i
        for period in range(1, MAX_PERIOD + 1):
            j = i + period
            while j < e and cps[j] == cps[j - period]:
                j += 1
            if (j - i) // period >= MIN_REPEATS and j > best_end:
                best_period, best_end = period, j
        if best_period and _has_letter(cps, i, i + best_period, flags):
            whole = i + (best_end - i) // best_period * best_period
            covered += best_end - i
            n_cuts = _add_cut(cuts, n_cuts, doc, i + KEEP * best_period, whole, i, best_end)
            i = best_end
        else:
            i += 1
    return covered, n_cuts


def cut_runs(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` without the code-point spans `spans` (sorted, not overlapping)."""
    parts = []
    last = 0
    for start, end in spans:
        parts.append(text[last:start])
        last = max(last, end)
    parts.append(text[last:])
    return "".join(parts)


def spans_by_row(cuts: np.ndarray) -> dict[int, list[tuple[int, int]]]:
    """The cuts (rows of doc, start, end) grouped by document, sorted."""
    found: dict[int, list[tuple[int, int]]] = {}
    for doc, start, end in cuts.tolist():
        found.setdefault(int(doc), []).append((int(start), int(end)))
    return {doc: sorted(spans) for doc, spans in found.items()}
