"""Rebuild the shipped normalization table (dataclean/data/lm/charmap.npz); see dataclean.lm.charmap.

python scripts/build_charmap.py
"""

from __future__ import annotations

from dataclean.lm.charmap import save_shipped

if __name__ == "__main__":
    print(f"wrote {save_shipped()}")
