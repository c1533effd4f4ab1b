"""Dotted-path overrides of a frozen settings tree: `train.learning_rate=3e-3`,
`model.mixers=softmax,linear`, `model.layout.options.pe_size=20`. Each value is parsed by the
type of the field it replaces (int, float, bool, str, tuple of str, a registry Choice by name,
with that entry's default options; an optional `X | None` field takes none/null or an X); an unknown path or a value of
the wrong form is a
ValueError with one line naming the path and what is accepted. A dialect's `aliases` map its
own dotted names (an original's key) to ours first.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any, Sequence

from src.registry import Choice


NONE_WORDS = ("none", "null")  # the value None of an optional setting (`float | None`)


def _optional_type(annotation: Any) -> type | None:
    """X for an annotation `X | None` (Optional[X]) of a plain type, else None."""
    if typing.get_origin(annotation) not in (typing.Union, types.UnionType):
        return None
    others = [a for a in typing.get_args(annotation) if a is not type(None)]
    return others[0] if len(others) == 1 and others[0] in (bool, int, float, str) else None


def _parse(path: str, text: str, current: Any, kind: str | None = None, optional: type | None = None) -> Any:
    where = f"--set {path}={text}"
    if optional is not None:  # `X | None`: none/null, or a value parsed as an X
        if text.lower() in NONE_WORDS:
            return None
        if current is None:
            current = optional()
    if isinstance(current, bool):
        if text.lower() in ("true", "1", "yes"):
            return True
        if text.lower() in ("false", "0", "no"):
            return False
        raise ValueError(f"{where}: accepted: true or false")
    if isinstance(current, int):
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"{where}: accepted: an integer") from None
    if isinstance(current, float):
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise ValueError(f"{where}: accepted: a finite number")
        return value
    if isinstance(current, tuple):
        return tuple(item.strip() for item in text.split(",") if item.strip())
    if isinstance(current, Choice):
        if text == current.name:
            return current
        from src.registry import UnknownChoice, registry

        if kind is None:
            return Choice(text)
        try:
            return Choice(text, registry(kind).get(text).default_options())
        except UnknownChoice:
            raise ValueError(f"{where}: accepted: {', '.join(registry(kind).names())}") from None
    if isinstance(current, str):
        return text
    raise ValueError(f"{where}: the setting {path!r} cannot be set from the command line")


def set_path(tree: Any, path: str, text: str) -> Any:
    """A copy of the frozen dataclass `tree` with the field at dotted `path` parsed from `text`."""
    head, _, rest = path.partition(".")
    if not dataclasses.is_dataclass(tree) or head not in {f.name for f in dataclasses.fields(tree)}:
        names = [f.name for f in dataclasses.fields(tree)] if dataclasses.is_dataclass(tree) else []
        raise ValueError(
            f"--set {path}={text}: {head!r} is not a setting here; accepted: "
            f"{', '.join(names) or 'nothing (not a settings group)'}"
        )
    current = getattr(tree, head)
    kind = next(f for f in dataclasses.fields(tree) if f.name == head).metadata.get("registry")
    try:
        optional = _optional_type(typing.get_type_hints(type(tree)).get(head))
    except (NameError, TypeError):  # an annotation that does not resolve: parse by the value
        optional = None
    value = set_path(current, rest, text) if rest else _parse(path, text, current, kind, optional)
    return dataclasses.replace(tree, **{head: value})


def apply_overrides(settings: Any, assignments: Sequence[str], aliases: dict | None = None) -> Any:
    """Apply every `dotted.path=value` in order (a path in `aliases` is renamed first)."""
    for item in assignments:
        path, eq, text = item.partition("=")
        if not eq or not path.strip():
            raise ValueError(
                f"--set {item!r} is not accepted; accepted: KEY=VALUE with a dotted "
                "settings path, e.g. train.learning_rate=0.003"
            )
        path = (aliases or {}).get(path.strip(), path.strip())
        settings = set_path(settings, path, text.strip())
    return settings
