"""`Session`, where the README shows it: a run's lifecycle lives in `dataclean.run.session`."""

from dataclean.run.session import Session

__all__ = ["Session"]
