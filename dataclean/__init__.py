"""dataclean: a data-quality pipeline for LLM training corpora.

Reads corpus shards, runs cleaning stages in parallel (locally or on Ray) and writes filtered
Parquet, an exclusion log with a reason for every dropped row, stats and a report.
"""

__version__ = "0.1.0"
