"""`dataclean supervise`: run a training command under the stop-the-bleeding playbook.

    dataclean supervise --logs LOGS [--checkpoints DIR] [--action watch] -- python train.py ...

See `dataclean.feedback.supervise` for what it does and docs/playbook.md for a walk-through.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from dataclean.errors import ConfigError
from dataclean.feedback.detectors import DIAGNOSES
from dataclean.feedback.playbook import LR_FACTOR_ENV, Playbook
from dataclean.feedback.supervise import SuperviseOptions, Supervisor


def _actions(values: tuple[str, ...]) -> dict[str, str]:
    """`--action watch` (every diagnosis) and `--action data=rollback` (one), later ones winning."""
    actions = dict.fromkeys(DIAGNOSES, "watch")
    for value in values:
        diagnosis, _, chosen = value.rpartition("=")
        if not diagnosis:
            actions = dict.fromkeys(DIAGNOSES, chosen)
        else:
            actions[diagnosis] = chosen
    return actions


@click.command("supervise", context_settings={"allow_interspersed_args": False})
@click.option("--logs", type=click.Path(path_type=Path), help="The guard's folder (LOGS/steps, LOGS/losses).")
@click.option(
    "--steps",
    type=click.Path(path_type=Path),
    help="Step log to follow: a Parquet folder or a CSV/JSONL file.",
)
@click.option(
    "--losses", type=click.Path(path_type=Path), help="Per-sample loss log (to diagnose data spikes)."
)
@click.option(
    "--checkpoints", type=click.Path(path_type=Path), help="Folder of checkpoints (default LOGS/checkpoints)."
)
@click.option(
    "--checkpoint-pattern", default="checkpoint-{step}", show_default=True, help="Checkpoint names."
)
@click.option("--quarantine", type=click.Path(path_type=Path), help="List to merge blamed samples into.")
@click.option(
    "--incidents", type=click.Path(path_type=Path), help="Incident log (default LOGS/supervise.jsonl)."
)
@click.option(
    "--corpus", type=click.Path(exists=True, path_type=Path), help="Cleaned corpus, for text hashes."
)
@click.option(
    "--resume-args",
    default="--resume_from_checkpoint {checkpoint}",
    show_default=True,
    help="Appended on a relaunch; {checkpoint}, {step}, {lr_factor}, {lr} are filled in.",
)
@click.option("--lr-args", default="", help="Appended on a relaunch, e.g. '--lr-factor {lr_factor}'.")
@click.option("--lr-env", default=LR_FACTOR_ENV, show_default=True, help="Env var holding the lr factor.")
@click.option("--base-lr", type=float, help="The schedule's lr, for {lr} (= factor x base).")
@click.option("--lr-factor", type=float, default=0.2, show_default=True, help="lr factor after a rollback.")
@click.option("--ramp-steps", type=int, default=100, show_default=True, help="Steps back to the schedule.")
@click.option("--watch-steps", type=int, default=100, show_default=True, help="Steps a spike is watched.")
@click.option("--settle-steps", type=int, default=10, show_default=True, help="Steps judged for recovery.")
@click.option("--action", "actions", multiple=True, help="log|watch|rollback|stop, or DIAGNOSIS=ACTION.")
@click.option("--spike-window", type=int, help="Steps the spike detector judges by (default 100).")
@click.option("--spike-ratio", type=float, help="Times the recent level a spike reaches (default 1.5).")
@click.option("--max-restarts", type=int, default=3, show_default=True, help="Relaunches at most.")
@click.option("--alert-command", help="Shell command run once per incident, its JSON on stdin.")
@click.option("--webhook", help="URL the incident's JSON is POSTed to, once per incident.")
@click.option("--poll", type=float, default=0.5, show_default=True, help="Seconds between log reads.")
@click.option("--grace", type=float, default=30.0, show_default=True, help="Seconds from SIGTERM to SIGKILL.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def supervise(
    logs: Path | None,
    steps: Path | None,
    losses: Path | None,
    checkpoints: Path | None,
    checkpoint_pattern: str,
    quarantine: Path | None,
    incidents: Path | None,
    corpus: Path | None,
    resume_args: str,
    lr_args: str,
    lr_env: str,
    base_lr: float | None,
    lr_factor: float,
    ramp_steps: int,
    watch_steps: int,
    settle_steps: int,
    actions: tuple[str, ...],
    spike_window: int | None,
    spike_ratio: float | None,
    max_restarts: int,
    alert_command: str | None,
    webhook: str | None,
    poll: float,
    grace: float,
    command: tuple[str, ...],
) -> None:
    """Run COMMAND; on a loss spike kill it, quarantine, and relaunch it from a checkpoint."""
    if logs is None and steps is None:
        raise ConfigError("supervise: give --logs (the guard's folder) or --steps (a step log)")
    if logs is not None:
        steps = steps or logs / "steps"
        losses = losses or logs / "losses"
        checkpoints = checkpoints or logs / "checkpoints"
    assert steps is not None
    playbook = Playbook(
        lr_factor=lr_factor, ramp_steps=ramp_steps, watch_steps=watch_steps, settle_steps=settle_steps
    )
    options = SuperviseOptions(
        steps=steps,
        losses=losses,
        checkpoints=checkpoints,
        checkpoint_pattern=checkpoint_pattern,
        quarantine=quarantine,
        incidents=incidents,
        resume_args=resume_args,
        lr_args=lr_args,
        lr_env=lr_env,
        base_lr=base_lr,
        action=_actions(actions),
        playbook=playbook,
        max_restarts=max_restarts,
        alert_command=alert_command,
        webhook=webhook,
        poll=poll,
        grace=grace,
        corpus=corpus,
        spike_window=spike_window,
        spike_ratio=spike_ratio,
    )
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    supervisor = Supervisor(command, options)
    code = supervisor.run()
    print(
        f"dataclean supervise: {supervisor.restarts} restarts, {supervisor.alerts} incidents; log in "
        f"{supervisor.incidents_path}",
        file=sys.stderr,
    )
    sys.exit(code)
