"""Stages whose "kernels" only note which process compiled them: importable by name, so that
a compile helper process (`dataclean.run.compile_process`) can unpickle them too."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pyarrow as pa

from dataclean.stage import Stage


@dataclass
class Noted(Stage):
    """Writes its process id to `folder/<name>` when its kernels compile."""

    folder: str = ""
    name: ClassVar[str] = "noted"

    def __call__(self, table: pa.Table) -> pa.Table:
        return table

    def compile_kernels(self) -> None:
        with open(Path(self.folder) / self.name, "a") as noted:
            noted.write(f"{os.getpid()}\n")


@dataclass
class Short(Noted):
    name: ClassVar[str] = "short"
    compile_seconds: ClassVar[float] = 1.0


@dataclass
class Middle(Noted):
    name: ClassVar[str] = "middle"
    compile_seconds: ClassVar[float] = 2.0


@dataclass
class Long(Noted):
    """The longest: waits (up to a minute) until another process has compiled `middle`, as when
    the helper compiles the next stage while this process compiles the longest."""

    name: ClassVar[str] = "long"
    compile_seconds: ClassVar[float] = 3.0

    def compile_kernels(self) -> None:
        super().compile_kernels()
        deadline = time.monotonic() + 60
        while not (Path(self.folder) / "middle").exists() and time.monotonic() < deadline:
            time.sleep(0.05)


def compiled_by(folder: Path) -> dict[str, list[int]]:
    """{stage name: the process ids that compiled it} from the notes in `folder`."""
    return {path.name: [int(line) for line in path.read_text().split()] for path in folder.iterdir()}
