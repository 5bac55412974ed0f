"""Stage parameters from strings: `--set STAGE.PARAM=VALUE`, `--only`, `--skip`.

Values are converted to the type the stage's dataclass field declares and the stage is rebuilt
with `dataclasses.replace`, so its own `__post_init__` validation runs: a setting is exactly as
valid as the same value passed to the constructor.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import types
import typing
from collections.abc import Iterable, Sequence
from typing import Any, Literal, Union

from dataclean.errors import ConfigError
from dataclean.stage import Stage

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _convert(value: str, annotation: Any, where: str) -> Any:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (Union, types.UnionType):
        if value.lower() in ("none", "null", "") and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(value, arg, where)
            except ConfigError as error:
                errors.append(str(error))
        raise ConfigError(errors[0] if errors else f"{where}: cannot use {value!r}")
    if origin is Literal:
        for choice in args:
            if str(choice) == value:
                return choice
        raise ConfigError(f"{where}: {value!r} is not one of {', '.join(map(str, args))}")
    if origin in (tuple, list):
        inner = args[0] if args else str
        items = [part.strip() for part in value.split(",") if part.strip()]
        converted = [_convert(item, inner, where) for item in items]
        return tuple(converted) if origin is tuple else converted
    if annotation is bool:
        lowered = value.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise ConfigError(f"{where}: {value!r} is not on/off")
    if annotation in (int, float, str):
        try:
            return annotation(value)
        except ValueError:
            raise ConfigError(f"{where}: {value!r} is not a valid {annotation.__name__}") from None
    raise ConfigError(f"{where}: cannot be set from the command line")


def parse_settings(settings: Iterable[str]) -> dict[str, dict[str, str]]:
    """Parse `STAGE.PARAM=VALUE` strings into {stage: {param: value}}."""
    parsed: dict[str, dict[str, str]] = {}
    for setting in settings:
        key, sep, value = setting.partition("=")
        stage, dot, param = key.partition(".")
        if not sep or not dot or not stage or not param:
            raise ConfigError(f"--set {setting!r}: expected STAGE.PARAM=VALUE")
        parsed.setdefault(stage.strip(), {})[param.strip()] = value.strip()
    return parsed


def configure(stage: Stage, values: dict[str, str]) -> Stage:
    """Return a copy of `stage` with parameters set from strings, validated by the constructor."""
    if not dataclasses.is_dataclass(stage):
        raise ConfigError(f"stage {stage.name!r} has no parameters")
    fields = {f.name: f for f in dataclasses.fields(stage) if f.init}
    hints = typing.get_type_hints(type(stage))
    changes: dict[str, Any] = {}
    for param, raw in values.items():
        if param not in fields:
            valid = ", ".join(sorted(fields)) or "none"
            raise ConfigError(f"stage {stage.name!r} has no parameter {param!r} (valid: {valid})")
        changes[param] = _convert(raw, hints[param], f"{stage.name}.{param}")
    return dataclasses.replace(stage, **changes)


def select_stages(
    stages: Sequence[Stage],
    only: Sequence[str] = (),
    skip: Sequence[str] = (),
    settings: dict[str, dict[str, str]] | None = None,
) -> list[Stage]:
    """Apply `--only`, `--skip` and `--set` to a recipe's stages; unknown names are errors."""
    names = [stage.name for stage in stages]
    valid = ", ".join(dict.fromkeys(names))
    for name in [*only, *skip, *(settings or {})]:
        if name not in names:
            raise ConfigError(f"unknown stage {name!r} (stages in this pipeline: {valid})")
    chosen = []
    for stage in stages:
        if (only and stage.name not in only) or stage.name in skip:
            continue
        if settings and stage.name in settings:
            stage = configure(stage, settings[stage.name])
        chosen.append(stage)
    return chosen


def _jsonable(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return repr(value)


def describe(stages: Sequence[Stage]) -> list[dict[str, Any]]:
    """JSON-ready description of stages: name, class and parameters (for the manifest)."""
    return [
        {
            "stage": stage.name,
            "class": f"{type(stage).__module__}.{type(stage).__qualname__}",
            "params": _jsonable(stage.params()),
        }
        for stage in stages
    ]


def declared(stages: Sequence[Stage]) -> list[dict[str, Any]]:
    """What each stage declares of its columns and outputs (for the manifest, apart from the
    config and its hash): the report finds its sections by these, never by a stage's name."""
    described = []
    for stage in stages:
        records = stage.outputs.records
        described.append(
            {
                "stage": stage.name,
                "requires": list(stage.required_columns()),
                "reads_if_present": list(stage.optional_columns()),
                "provides": list(stage.provided_columns()),
                "folder": stage.outputs.folder,
                "records": records.file if records is not None else None,
                "adds_rows": stage.adds_rows,
            }
        )
    return described


def config_hash(config: dict[str, Any]) -> str:
    """Stable hash of a JSON-ready config (sorted keys), recorded in the manifest."""
    blob = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
