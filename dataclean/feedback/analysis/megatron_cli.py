"""What `dataclean feedback --steps TRAIN.LOG --megatron DATA_ARGS` adds to the feedback run: part of
the command (it parses the option with `dataclean megatron locate`'s own definitions).

Every spike the analysis diagnosed as `data` in Megatron-LM's log is an iteration; with the run's
data options (those of `dataclean megatron locate`, parsed by the same definitions) its documents
are named from Megatron's own cache (`dataclean.export.megatron.locate`) and listed as suspects
for review (`dataclean.feedback.megatron.suspects`): ranked by their per-document loss when the
loss log has one (`dataclean megatron losses`), else by the corpus's perplexity and quality
signals. A data spike's iteration holds global batch x sequence length tokens, so it names many
documents; nothing is applied until a person accepts entries (`dataclean feedback accept`).
"""

from __future__ import annotations

import pyarrow as pa

from dataclean import columns as C
from dataclean.feedback.analysis.analyze import Analysis
from dataclean.feedback.corpus import read_corpus_rows
from dataclean.feedback.megatron_log import is_megatron_log, logged_batches


def megatron_suspects(data_args: str, analysis: Analysis, steps: str, corpus: str | None) -> pa.Table:
    """The documents of the analysis's `data` spikes as a quarantine list for review (with their
    text and text hash when the corpus is given); `steps`: the log, whose consumed samples say
    where each iteration's samples start."""
    from dataclean.export.megatron.cli import data_locator, parse_data_args
    from dataclean.feedback.megatron import suspects

    locator = data_locator(parse_data_args(data_args), with_text=False)
    losses = analysis.losses.table if analysis.losses.table.num_rows else None
    logged = logged_batches(steps) if is_megatron_log(steps) else None
    listed = suspects(analysis.spikes, locator, losses=losses, corpus=corpus, logged=logged)
    iterations = sorted({s.step for s in analysis.spikes if s.diagnosis == "data"})
    ranked_by = "their loss at the iteration" if losses is not None else "the corpus's ppl and quality"
    analysis.notes.append(
        f"--megatron: {listed.num_rows} documents of the data spikes at iterations "
        f"{', '.join(map(str, iterations)) or 'none'} listed for review (ranked by {ranked_by})"
    )
    if corpus is None or listed.num_rows == 0:
        return listed
    rows, _ = read_corpus_rows(corpus, listed.column(C.SAMPLE_ID).to_pylist())
    known = {row[C.ID]: row for row in rows.to_pylist()}
    entries = listed.to_pylist()
    for entry in entries:
        row = known.get(entry[C.SAMPLE_ID])
        if row is not None:
            entry[C.TEXT_HASH], entry[C.TEXT] = row[C.TEXT_HASH], row[C.TEXT]
    return pa.Table.from_pylist(entries, schema=listed.schema)
