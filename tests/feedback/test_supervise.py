"""`dataclean supervise` on a real training process: spike, kill, quarantine, relaunch, alert.

The training process is `tiny_training.py` (a real tiny CPU run under a guard that only logs):
a corrupt stretch of data (a batch with four garbage samples, then batches with one each) makes
a data spike the loss does not recover from. The alert hook is a real shell command and the
webhook a real HTTP server on the loopback interface.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

pytest.importorskip("torch")

from dataclean.quarantine.lists import read_list

from .tiny_training import BASE_LR, schedule

SCRIPT = Path(__file__).with_name("tiny_training.py")
REPOSITORY = Path(__file__).resolve().parents[2]
SPIKE = 80
PLAN = f"{SPIKE}:4," + ",".join(f"{s}:1" for s in range(SPIKE + 1, SPIKE + 13))
SPIKE_JUNK = sorted(f"junk-{SPIKE}-{slot}" for slot in (3, 7, 11, 15))


class Webhook(BaseHTTPRequestHandler):
    bodies: ClassVar[list[dict]] = []

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        Webhook.bodies.append(json.loads(self.rfile.read(length)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def webhook():
    Webhook.bodies = []
    server = HTTPServer(("127.0.0.1", 0), Webhook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/incident", Webhook.bodies
    server.shutdown()
    server.server_close()


def test_supervise_kills_and_relaunches_the_run_from_the_checkpoint_and_alerts_once(tmp_path, webhook):
    url, bodies = webhook
    logs = tmp_path / "logs"
    alerts = tmp_path / "alerts.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPOSITORY), "DATACLEAN_LOG_FLUSH_SECONDS": "0.2"}
    command = [sys.executable, "-m", "dataclean", "supervise", "--logs", str(logs)]
    command += ["--watch-steps", "5", "--settle-steps", "3", "--poll", "0.1", "--grace", "20"]
    command += [
        "--spike-window",
        "20",
        "--ramp-steps",
        "10",
    ]  # as the guard's tests: a short run's early losses fall fast
    command += ["--alert-command", f"cat >> {alerts}; echo >> {alerts}", "--webhook", url, "--"]
    command += [sys.executable, str(SCRIPT), str(logs), "--steps", "110", "--plan", PLAN, "--sleep", "0.05"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    runs = [json.loads(line) for line in (logs / "runs.jsonl").read_text().splitlines()]
    assert len(runs) == 2, runs
    first, second = runs
    # The first process was killed mid-run (SIGTERM: it exited through its finally block).
    assert first["start"] == 0 and "finished" not in first
    assert SPIKE + 5 <= first["lrs"][-1][0] < 109
    assert set(SPIKE_JUNK) <= set(first["drawn"])
    # The second started from the last checkpoint before the spike, at 0.2x the lr, and never
    # drew the samples supervise quarantined.
    checkpoint = logs / "checkpoints" / f"checkpoint-{SPIKE}.pt"
    assert second["resumed_from"] == str(checkpoint) and second["start"] == SPIKE
    assert second["finished"] and second["lr_factor"] == "0.2"
    assert not set(SPIKE_JUNK) & set(second["drawn"])
    step, used = second["lrs"][0]
    assert step == SPIKE and used == pytest.approx(0.2 * BASE_LR * schedule(SPIKE), rel=1e-3)
    assert second["lrs"][-1][1] == pytest.approx(BASE_LR * schedule(109), rel=1e-3)  # ramped back
    listed = read_list(logs / "quarantine.parquet").to_pylist()
    assert sorted(r["sample_id"] for r in listed) == SPIKE_JUNK
    assert {r["source"] for r in listed} == {"supervise"}
    # The incident log, the alert hook and the webhook: one incident, told once each.
    records = [json.loads(line) for line in (logs / "supervise.jsonl").read_text().splitlines()]
    kinds = [(r["event"], r.get("decision") or r.get("diagnosis")) for r in records]
    assert kinds[:4] == [("launch", None), ("spike", "data"), ("decision", "watch"), ("decision", "rollback")]
    assert [k[0] for k in kinds if k[0] in ("launch", "alert", "exit")] == [
        "launch",
        "alert",
        "launch",
        "exit",
    ]
    assert sum(k[0] == "launch" for k in kinds) == 2 and sum(k[0] == "alert" for k in kinds) == 1
    told = [json.loads(line) for line in alerts.read_text().splitlines() if line.strip()]
    assert told == bodies and len(bodies) == 1
    body = bodies[0]
    assert (body["step"], body["diagnosis"], body["action"]) == (SPIKE, "data", "rollback")
    assert sorted(body["blamed"]) == SPIKE_JUNK and body["checkpoint_step"] == SPIKE
    assert any("not recovered" in line for line in body["evidence"])


def test_supervise_relaunches_a_hugging_face_trainer_with_resume_from_checkpoint(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    env = {**os.environ, "PYTHONPATH": str(REPOSITORY), "DATACLEAN_LOG_FLUSH_SECONDS": "0.2"}
    guard = tmp_path / "guard"
    command = [sys.executable, "-m", "dataclean", "supervise", "--logs", str(guard)]
    command += ["--checkpoints", str(tmp_path / "out"), "--action", "data=rollback", "--spike-window", "20"]
    command += ["--poll", "0.1", "--grace", "20", "--"]
    command += [sys.executable, str(SCRIPT.with_name("hf_training.py")), str(tmp_path), "--steps", "60"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    runs = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert len(runs) == 2, runs
    first, second = runs
    junk = {"junk-0", "junk-1", "junk-2"}  # test_guard_hf's garbage, in the batch of step 40
    assert "finished" not in first and junk <= set(first["drawn"])
    assert second["resumed_from"] == str(tmp_path / "out" / "checkpoint-40")
    assert second["finished"] == 60 and second["lr_factor"] == "0.2"
    assert second["drawn"] and not junk & set(second["drawn"])
    assert len(second["drawn"]) == 20 * 8  # steps 40-59, from the checkpoint on
    listed = read_list(guard / "quarantine.parquet").to_pylist()
    assert {r["sample_id"] for r in listed} == junk and "supervise" in listed[0]["source"]
