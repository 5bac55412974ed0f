"""The run lifecycle (`dataclean.run.session.Session`): stages loaded while the executor starts, the
report written while it closes, and everything closed when something fails."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pytest

from dataclean import columns as C
from dataclean.errors import ConfigError
from dataclean.executors.base import WorkerFunction
from dataclean.executors.local import LocalExecutor
from dataclean.executors.starting import Starting
from dataclean.run.session import Session
from dataclean.stage import Stage
from dataclean.stages.clean import CleanText
from dataclean.stages.language import IdentifyLanguage
from tests.conftest import read_rows, write_jsonl


def test_a_session_runs_and_writes_the_report_on_leaving(tmp_path: Path) -> None:
    inp = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": "Plain words."}, {"id": "b", "text": ""}])
    out = tmp_path / "out"
    with Session(lambda: [CleanText(), IdentifyLanguage()], "local") as session:
        assert [stage.name for stage in session.stages] == ["clean", "language"]
        stats = session.run([str(inp)], str(out))
        assert not (out / "report.html").exists()  # written on leaving, while the executor closes
    assert (out / "report.html").exists() and session.executor is None
    assert stats["totals"]["kept"] == 1 and [row["id"] for row in read_rows(out / "data")] == ["a"]


def test_a_recipe_that_fails_to_load_closes_the_session(tmp_path: Path) -> None:
    def broken() -> list[Stage]:
        raise ConfigError("clean.nonsense: no such parameter")

    session = Session(broken, "local")
    with pytest.raises(ConfigError, match="nonsense"), session:
        pass
    assert session.executor is None


def test_a_failed_run_writes_no_report(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match="needs column 'lang'"), Session([_NeedsLang()], "local") as session:
        session.run([str(write_jsonl(tmp_path / "in.jsonl", [{"text": "x"}]))], str(out))
    assert not (out / "report.html").exists()


class _NeedsLang(Stage):
    """A stage reading `lang` with no producer of it before it: the run fails at planning."""

    name: ClassVar[str] = "needs_lang"
    requires: ClassVar[tuple[str, ...]] = (C.LANG,)

    def __call__(self, table: pa.Table) -> pa.Table:
        return table


# A map before the executor is up (`dataclean.executors.starting.Starting`): this process runs items until
# the executor's workers are ready, they take the rest; in order, each item once.
_UP = threading.Event()


class _Slow(WorkerFunction):
    """Each item: (item, the process that ran it), after 0.1 s. In the test's own process the
    second item lets the executor start, and the third waits (up to a minute) until a worker has
    run an item (`ran_there`): a worker's start can take longer than this process's items on a
    loaded machine, and both must take part."""

    shareable: ClassVar[bool] = True  # as a GroupWorker is

    def __init__(self, ran_there: Path) -> None:
        self.ran = 0
        self.ran_there = ran_there
        self.here = os.getpid()  # the test's process (a worker imports this module as well)

    def __call__(self, item: int) -> tuple[int, int]:
        if os.getpid() == self.here:
            self.ran += 1
            if self.ran == 2:
                _UP.set()
            deadline = time.monotonic() + 60
            while self.ran >= 3 and not self.ran_there.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        else:
            self.ran_there.touch()
        time.sleep(0.1)
        return item, os.getpid()


def _started_when_up(executor: Any) -> Any:
    _UP.wait(60)
    return executor


def test_a_map_before_the_executor_is_up_runs_here_then_on_its_workers(
    ray_executor: Any, tmp_path: Path
) -> None:
    _UP.clear()
    seen: list[int] = []
    starting = Starting(lambda: _started_when_up(ray_executor), 2)
    work = _Slow(tmp_path / "ran-on-a-worker")
    results = starting.map(work, list(range(24)), on_result=lambda index, _: seen.append(index))
    assert [item for item, _ in results] == list(range(24)) and sorted(seen) == list(range(24))
    ran_where = {pid for _, pid in results}
    assert os.getpid() in ran_where and len(ran_where) > 1  # here first, then Ray's workers
    assert starting.map(abs, [-1, -2]) == [1, 2]  # once up, maps go to the executor


class _FailsHere:
    shareable = True

    def __call__(self, item: int) -> int:
        if item == 1:
            raise ConfigError("item 1 is bad")
        return item


def test_an_error_in_this_process_ends_the_shared_map() -> None:
    never = threading.Event()
    starting = Starting(lambda: never.wait(60) or LocalExecutor(), 2)  # type: ignore[func-returns-value]
    with pytest.raises(ConfigError, match="item 1 is bad"):
        starting.map(_FailsHere(), [0, 1, 2, 3])
    never.set()


# With an embedded Ray on 2 cores or more, this process is one of the workers for the whole run
# (`Starting(driver_works=True)`): it takes items beside Ray's workers in every shareable or light
# map, to the last one, also once Ray is up.


class _Paced(WorkerFunction):
    """Each item: (item, the process that ran it), after `seconds`."""

    shareable: ClassVar[bool] = True

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self, item: int) -> tuple[int, int]:
        time.sleep(self.seconds)
        return item, os.getpid()


class _PacedLight(_Paced):
    shareable: ClassVar[bool] = False  # a fit's step: light, no model


def _appender(seen: list[int]) -> Any:
    return lambda index, _: seen.append(index)


def test_this_process_works_beside_a_started_ray_to_the_last_item(ray_executor: Any) -> None:
    starting = Starting(lambda: ray_executor, 2, driver_works=True)
    starting.ready()
    assert starting.workers == 2 and starting.remote_workers == 1
    for fn, light in ((_Paced(0.05), False), (_PacedLight(0.05), True)):
        seen: list[int] = []
        results = starting.map(fn, list(range(40)), on_result=_appender(seen), light=light)
        assert [item for item, _ in results] == list(range(40)) and sorted(seen) == list(range(40))
        ran_where = {pid for _, pid in results}
        assert os.getpid() in ran_where and len(ran_where) > 1, (light, ran_where)
    assert starting.map(abs, [-1, -2]) == [1, 2]  # neither shareable nor light: Ray's alone
    assert starting.map(_Paced(0), []) == []


class _FailsThere:
    """Fails on any item run outside the test's process."""

    shareable = True

    def __init__(self) -> None:
        self.here = os.getpid()

    def __call__(self, item: int) -> int:
        time.sleep(0.05)
        if os.getpid() != self.here:
            raise ConfigError(f"item {item} failed on a worker")
        return item


def test_an_error_on_a_worker_ends_a_map_this_process_shares(ray_executor: Any) -> None:
    starting = Starting(lambda: ray_executor, 2, driver_works=True)
    started = time.monotonic()
    with pytest.raises(ConfigError, match="failed on a worker"):
        starting.map(_FailsThere(), list(range(2000)))
    assert time.monotonic() - started < 60  # this process stopped taking items (2000 x 0.05 s)


def test_an_embedded_ray_session_starts_ray_with_one_worker_fewer() -> None:
    session = Session([CleanText()], "ray", workers=2)
    with session:
        executor = session.executor
        assert isinstance(executor, Starting) and executor.workers == 2
        assert executor.ready().workers == 1 and executor.remote_workers == 1
