"""The one base of every system's settings: a frozen dataclass tree that knows its system, reads
itself back from JSON (checking every key and the type of every value) and validates itself.

    @dataclass(frozen=True)
    class MySettings(Settings):
        system: ClassVar[str] = "mine"          # its entry in registry "system"
        model: MyModel = field(default_factory=MyModel)
        train: MyTrain = field(default_factory=MyTrain)

        def check(self) -> None:                 # the system's own rules (ranges, combinations)
            require(self.train.steps >= 1, "train.steps", self.train.steps, "an integer >= 1")

    settings = MySettings.from_dict(json.loads(text))   # SettingsError naming the key
    settings.validate()                                  # types, every registry option, check()

A field that holds a registry choice is declared with `choice_field(kind, name)`; `from_dict`
reads it with that registry, and `validate` checks its options (types and the options' own
`check()`). Every error is a `SettingsError` whose one-line message starts with the dotted path
of the setting (`model.width='x' is not accepted; accepted: an integer`), so a command line
that names the setting otherwise (a YAML key, a flag) can say it in its own words
(`SettingsError.translate`).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
import re
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from src.registry import Choice, UnknownChoice, did_you_mean, registry

SCHEMA_VERSION = 3
# Eval tasks are drawn from this seed whatever the training seed is, so runs of different seeds
# are scored on the same tasks (SPEC §4); the recipe's (src/systems/lm.py) is EVAL_SEED + 1.
EVAL_SEED = 20230


class SettingsError(ValueError):
    """A bad setting; the message is one line that starts with the setting's dotted path."""

    def translate(self, names: Mapping[str, str]) -> str:
        """The message with our dotted paths replaced by a dialect's names for them (a key that
        ends with a dot renames every path under it), longest first."""
        text = str(self)
        for ours, theirs in sorted(names.items(), key=lambda item: -len(item[0])):
            after = "" if ours.endswith(".") else r"(?=[=:.\[]|$)"
            text = re.sub(rf"(?<![\w.-]){re.escape(ours)}{after}", theirs, text)
        return text


class UnknownEntry(SettingsError):
    """A registry name the settings hold that no entry of this checkout has (the code that made
    them registered it: a new mixer, task or analysis not here)."""

    def __init__(self, path: str, kind: str, name: str):
        names = registry(kind).names()
        self.suggestion = did_you_mean(name, names)  # "; did you mean 'x'?" or ""
        super().__init__(f"{path}={name!r} is unknown; accepted: {', '.join(names)}{self.suggestion}")
        self.path, self.kind, self.name = path, kind, name


def require(ok: bool, path: str, value: Any, accepted: str) -> None:
    """SettingsError `path=value is not accepted; accepted: ...` unless `ok`."""
    if not ok:
        raise SettingsError(f"{path}={value!r} is not accepted; accepted: {accepted}")


def is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def require_int(path: str, value: Any, low: int, high: int | None = None) -> None:
    what = f"an integer >= {low}" if high is None else f"an integer in [{low}, {high}]"
    require(is_int(value) and value >= low and (high is None or value <= high), path, value, what)


def require_number(
    path: str, value: Any, low: float, *, open_low: bool = False, high: float | None = None, open_high: bool = False
) -> None:
    left, right = "(" if open_low else "[", ")" if open_high else "]"
    what = (
        f"a finite number {'>' if open_low else '>='} {low:g}"
        if high is None
        else f"a number in {left}{low:g}, {high:g}{right}"
    )
    ok = is_number(value) and (value > low if open_low else value >= low)
    if ok and high is not None:
        ok = value < high if open_high else value <= high
    require(ok, path, value, what)


def require_one_of(path: str, value: Any, accepted) -> None:
    require(value in tuple(accepted), path, value, ", ".join(map(str, accepted)))


def choices_field(kind: str) -> Any:
    """A dataclass field holding several Choices of registry `kind` (a tuple, empty by default),
    left out of `to_dict` while empty, so that the records and digests of settings that never
    use it stay as they were before it existed."""
    return field(default=(), metadata={"registry": kind, "omit_if_empty": True})


def added_field(default: Any) -> Any:
    """A dataclass field added after runs were recorded: left out of `to_dict` while at its
    `default`, so that those records and digests stay as they were."""
    return field(default=default, metadata={"omit_if_default": True})


def without_empty(tree: Any, raw: dict) -> dict:
    """`raw` (dataclasses.asdict of `tree`) without the empty choices_field values and the
    added_field values at their defaults, at any depth."""
    for f in dataclasses.fields(tree):
        value = getattr(tree, f.name)
        if (f.metadata.get("omit_if_empty") and value == ()) or (
            f.metadata.get("omit_if_default") and value == f.default
        ):
            raw.pop(f.name, None)
        elif dataclasses.is_dataclass(value) and isinstance(raw.get(f.name), dict):
            without_empty(value, raw[f.name])
    return raw


def choice_field(kind: str, name: str, **options) -> Any:
    """A dataclass field holding a Choice of registry `kind` (default: `name` with `options`)."""

    def default() -> Choice:
        entry = registry(kind).get(name)
        return Choice(entry.name, dataclasses.replace(entry.default_options(), **options))

    return field(default_factory=default, metadata={"registry": kind})


# ---------------------------------------------------------------------------
# Reading a tree back from JSON, with a named error for every bad key or value

_SCALARS = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


def _accepts(annotation, value) -> bool:
    if annotation is typing.Any:
        return True
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_accepts(a, value) for a in typing.get_args(annotation))
    if annotation is type(None):
        return value is None
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation is int:
        return is_int(value)
    if annotation in (bool, str):
        return isinstance(value, annotation)
    return True


def _describe(annotation) -> str:
    args = (
        typing.get_args(annotation)
        if typing.get_origin(annotation) in (typing.Union, types.UnionType)
        else (annotation,)
    )
    words = [_SCALARS.get(a, "null" if a is type(None) else getattr(a, "__name__", str(a))) for a in args]
    return " or ".join(words)


def _read_value(annotation, meta: Mapping, value, path: str):
    kind = meta.get("registry")
    if kind is not None and typing.get_origin(annotation) is tuple:  # several choices (choices_field)
        if not isinstance(value, (list, tuple)):
            raise SettingsError(f"{path}={value!r} is not accepted; accepted: a list of names of registry {kind!r}")
        return tuple(read_choice(kind, v, f"{path}[{i}]") for i, v in enumerate(value))
    if kind is not None:
        return read_choice(kind, value, path)
    origin = typing.get_origin(annotation)
    if dataclasses.is_dataclass(annotation):
        return read_tree(annotation, value, path + ".")
    if origin is tuple or annotation is tuple:
        if not isinstance(value, (list, tuple)):
            raise SettingsError(f"{path}={value!r} is not accepted; accepted: a list")
        item = (typing.get_args(annotation) or (typing.Any,))[0]
        for i, v in enumerate(value):
            if not _accepts(item, v):
                raise SettingsError(f"{path}[{i}]={v!r} is not accepted; accepted: {_describe(item)}")
        return tuple(value)
    if not _accepts(annotation, value):
        raise SettingsError(f"{path}={value!r} is not accepted; accepted: {_describe(annotation)}")
    if annotation is float and is_int(value):
        return float(value)
    return value


def read_tree(cls: type, raw: Any, prefix: str = "", legacy: Mapping[str, str] | None = None):
    """An instance of the frozen dataclass `cls` from a JSON mapping: unknown keys, values of the
    wrong type and unknown registry names are SettingsErrors naming the dotted key; missing keys
    take their defaults (records written before a field existed). `legacy` renames old keys
    (dotted, relative to this tree) first."""
    where = prefix.rstrip(".") or "settings"
    if not isinstance(raw, Mapping):
        raise SettingsError(f"{where}={raw!r} is not accepted; accepted: a mapping")
    raw = copy.deepcopy(dict(raw))  # renames must not touch the caller's mapping
    for old, new in (legacy or {}).items():
        _rename(raw, old.split("."), new.split("."))
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls) if f.init}
    extra = sorted(set(raw) - set(known))
    if extra:
        raise SettingsError(f"{prefix}{extra[0]}: unknown key; accepted: {', '.join(sorted(known))}")
    values = {
        name: _read_value(hints[name], known[name].metadata, raw[name], prefix + name) for name in known if name in raw
    }
    try:
        return cls(**values)
    except (TypeError, ValueError) as err:
        raise SettingsError(f"{where}: {err}") from None


def _set_if_absent(raw: dict, path: list[str], value: Any) -> None:
    """raw[path] = value where the parent mapping exists and has no such key (a record written
    before the key existed)."""
    node = raw
    for key in path[:-1]:
        node = node.get(key) if isinstance(node, dict) else None
    if isinstance(node, dict) and path[-1] not in node:
        node[path[-1]] = value


def _rename(raw: dict, old: list[str], new: list[str]) -> None:
    node = raw
    for key in old[:-1]:
        node = node.get(key) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            return
    if not isinstance(node, dict) or old[-1] not in node:
        return
    value = node.pop(old[-1])
    target = raw
    for key in new[:-1]:
        target = target.setdefault(key, {})
    target.setdefault(new[-1], value)


def read_choice(kind: str, raw: Any, path: str) -> Choice:
    """A Choice from {"name", "options"} or a bare name, its options read with their types."""
    if isinstance(raw, str):
        raw = {"name": raw}
    if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
        raise SettingsError(
            f"{path}={raw!r} is not accepted; accepted: a name of registry {kind!r} or {{name, options}}"
        )
    extra = sorted(set(raw) - {"name", "options"})
    if extra:
        raise SettingsError(f"{path}.{extra[0]}: unknown key; accepted: name, options")
    try:
        entry = registry(kind).get(raw["name"])
    except UnknownChoice:
        raise UnknownEntry(path, kind, raw["name"]) from None
    options = read_tree(entry.options, raw.get("options") or {}, f"{path}.options.")
    return Choice(entry.name, options)


# ---------------------------------------------------------------------------
# Validation of a whole tree


def check_tree(tree: Any, prefix: str = "") -> None:
    """Every value of a settings tree has its field's type; every Choice names a registered
    entry, has that entry's options class and passes the options' own `check()`."""
    hints = typing.get_type_hints(type(tree))
    for f in dataclasses.fields(tree):
        value, path = getattr(tree, f.name), prefix + f.name
        kind = f.metadata.get("registry")
        if kind is not None and typing.get_origin(hints[f.name]) is tuple:
            if not isinstance(value, tuple):
                raise SettingsError(
                    f"{path}={value!r} is not accepted; accepted: a list of choices of registry {kind!r}"
                )
            for i, item in enumerate(value):
                check_choice(kind, item, f"{path}[{i}]")
        elif kind is not None:
            check_choice(kind, value, path)
        elif dataclasses.is_dataclass(value):
            check_tree(value, path + ".")
            _own_check(value, path)
        elif typing.get_origin(hints[f.name]) is tuple:
            _read_value(hints[f.name], {}, list(value) if isinstance(value, tuple) else value, path)
        else:
            _read_value(hints[f.name], {}, value, path)


def check_choice(kind: str, value: Any, path: str) -> None:
    if not isinstance(value, Choice):
        raise SettingsError(f"{path}={value!r} is not accepted; accepted: a choice of registry {kind!r}")
    try:
        entry = registry(kind).get(value.name)
    except UnknownChoice:
        raise UnknownEntry(path, kind, value.name) from None
    if not isinstance(value.options, entry.options):
        raise SettingsError(f"{path}.options are not those of {kind} {value.name!r}")
    check_tree(value.options, f"{path}.options.")
    _own_check(value.options, f"{path}.options")


def _own_check(part: Any, path: str) -> None:
    """A part's own rules (its `check()`), its error named by the part's dotted path."""
    check = getattr(part, "check", None)
    if check is not None:
        try:
            check()
        except ValueError as err:  # the part's rules: "field=value ..., accepted: ..."
            raise SettingsError(f"{path}.{err}") from None


@dataclass(frozen=True)
class Settings:
    """The base of every system's settings tree (see the module docstring)."""

    system: ClassVar[str] = ""
    unit: ClassVar[str] = "step"  # what one step of the training loop is called
    # the top-level keys every record of this system has had (a mapping without them is not one)
    required_keys: ClassVar[tuple[str, ...]] = ()
    # old dotted keys -> current ones, applied when an older record is read
    legacy_keys: ClassVar[Mapping[str, str]] = {}
    # dotted key -> the value a record written before the key existed was trained with (where
    # that differs from the key's default)
    absent_means: ClassVar[Mapping[str, Any]] = {}

    def describe(self) -> str:
        """A short label of the run for titles and progress bars."""
        return self.system

    def loss_figure_file(self) -> str | None:
        """Where the loss figure goes (analysis.loss_figure), or None: none is drawn."""
        return None

    def loss_figure_marks(self) -> list[int]:
        """Steps the loss figure marks (curriculum boundaries), none by default."""
        return []

    def loss_figure_label(self) -> str:
        """The loss figure's y label: what the plotted loss is."""
        return "loss (the system's own: mean squared error)"

    def check(self) -> None:
        """The system's own rules beyond types and registry options; SettingsError."""

    def validate(self) -> "Settings":
        check_tree(self)  # types, registry options and each part's own check (src.train_settings')
        self.check()
        return self

    def to_dict(self) -> dict[str, Any]:
        return {
            **without_empty(self, dataclasses.asdict(self)),
            "system": self.system,
            "schema_version": SCHEMA_VERSION,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]):
        """From a `to_dict` mapping (any schema version this system has written)."""
        if not isinstance(raw, Mapping):
            raise SettingsError(f"settings={raw!r} is not accepted; accepted: a mapping")
        version = raw.get("schema_version", 1)
        require(
            is_int(version) and 1 <= version <= SCHEMA_VERSION,
            "schema_version",
            version,
            f"1..{SCHEMA_VERSION} (a record written by this or an earlier version)",
        )
        raw = {k: copy.deepcopy(v) for k, v in dict(raw).items() if k not in ("system", "schema_version")}
        missing = [k for k in cls.required_keys if k not in raw]
        if missing:
            raise SettingsError(
                f"settings.{missing[0]}: missing; accepted: a mapping with "
                f"{', '.join(cls.required_keys)} (a {cls.system} run's config.json)"
            )
        for dotted, value in cls.absent_means.items():
            _set_if_absent(raw, dotted.split("."), value)
        return read_tree(cls, raw, legacy=cls.legacy_keys)

    def digest(self) -> str:
        """sha256 of the settings as config.json stores them (what a checkpoint is tied to)."""
        text = json.dumps(self.to_dict(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()
