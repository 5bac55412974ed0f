"""`dataclean warmup`: compile a recipe's kernels into this machine's cache ahead of a run.

For a cluster's setup (an image build, an autoscaler's `setup_commands`): run on each node, in
the environment its `ray start` will have (the same user, `NUMBA_CACHE_DIR`/`XDG_CACHE_HOME`), so
that a run finds every node warm (docs/cluster.md). A run prepares fresh nodes by itself too
(`dataclean.run.node_kernels`); this moves that time out of the run.
"""

from __future__ import annotations

import time

import click

from dataclean.run.config import parse_settings, select_stages
from dataclean.run.kernel_cache import cache_folder, kernels_cached, mark_kernels_cached
from dataclean.run.kernels import compile_stage, kernel_stages
from dataclean.run.recipes import load_recipe


@click.command()
@click.option(
    "--pipeline",
    "recipe",
    default="default",
    show_default=True,
    help="Recipe name in pipelines/ or path to your own recipe .py file.",
)
@click.option("--set", "settings", multiple=True, metavar="STAGE.PARAM=VALUE", help="As for `dataclean run`.")
def warmup(recipe: str, settings: tuple[str, ...]) -> None:
    """Compile a recipe's kernels into this machine's cache (a cluster node's setup)."""
    stages = kernel_stages(select_stages(load_recipe(recipe), settings=parse_settings(settings)))
    kinds = [type(stage) for stage in stages]
    if kernels_cached(kinds):
        click.echo(f"{cache_folder()} already holds the kernels of {recipe}: nothing to do")
        return
    started = time.perf_counter()
    for stage in stages:
        compile_stage(stage)
    mark_kernels_cached(kinds)
    names = ", ".join(stage.name for stage in stages) or "none"
    seconds = time.perf_counter() - started
    click.echo(f"compiled the kernels of {recipe} ({names}) into {cache_folder()} in {seconds:.1f} s")
