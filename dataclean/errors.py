"""One exception base for everything a user can cause; the CLI turns it into one line and an exit code."""

from __future__ import annotations


class DatacleanError(Exception):
    """A problem with the user's input or settings, reported without a traceback.

    `exit_code` is what the CLI exits with. Subclasses name where the problem is.
    """

    exit_code = 2


class InputError(DatacleanError):
    """An input file that cannot be read as asked; names the file and, where there is one, the
    place: `line` for line formats (JSONL, text), counted from 1 as editors do; `row` for tables
    (Parquet, a dataset), counted from 0 as pyarrow does, and the message says so."""

    def __init__(
        self, path: str, message: str, row: int | str | None = None, line: int | None = None
    ) -> None:
        self.path = path
        self.row = row
        self.line = line
        self.detail = message
        if line is not None:
            where = f"{path}, line {line}"
        elif isinstance(row, int):
            where = f"{path}, row {row} (from 0)"
        else:
            where = path if row is None else f"{path}, row {row}"
        super().__init__(f"{where}: {message}")

    def __reduce__(self) -> tuple[type[InputError], tuple[str, str, int | str | None, int | None]]:
        """Pickle by the constructor's arguments: a Ray worker's error reaches the driver whole."""
        return (type(self), (self.path, self.detail, self.row, self.line))


class ConfigError(DatacleanError):
    """An invalid stage parameter or option; names the field and what would be valid."""


class OutputError(DatacleanError):
    """The output folder cannot be used as asked (exists with another config, not writable...)."""


class ExecutorError(DatacleanError):
    """Ray itself failed (it did not start, a node or worker died past its retries); says what
    failed and what to try. Rerunning the same command resumes where the run stopped."""

    exit_code = 4


class StageError(DatacleanError):
    """A stage failed on a row; names the stage, the input shard and the row id."""

    exit_code = 3
