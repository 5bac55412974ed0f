"""dataclean: a data-quality pipeline for LLM training corpora.

Reads corpus shards, runs cleaning stages in parallel (locally or on Ray) and writes filtered
Parquet, an exclusion log with a reason for every dropped row, stats and a report.
"""

from dataclean.run.kernel_cache import use_shared_cache

__version__ = "0.1.0"

use_shared_cache()  # before any kernel module is imported, in every process (dataclean.run.kernel_cache)
