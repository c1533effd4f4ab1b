"""Registries: one mechanism for every kind of choice a run makes.

A registry maps a name to an `Entry`: a frozen options dataclass, a builder and, where a
choice only makes sense for some runs, an `applies(settings)` predicate. Settings name
entries (`Choice(name, options)`); code asks the registry for the entry instead of
comparing names, so adding a mechanism is one registered entry in one file plus its test.

    from src.registry import registry
    MIXERS = registry("seq_mixer")

    @dataclass(frozen=True)
    class WindowOptions:
        window: int = 16

    @MIXERS.register("local", WindowOptions, doc="causal sliding-window softmax attention")
    def build_local(options, **dims):
        ...

    MIXERS.get("local").build(WindowOptions(window=8), **dims)
    MIXERS.get("nope")    # UnknownChoice: seq_mixer 'nope' is unknown; accepted: local, ...

Entries live in the modules of the packages listed in ENTRY_PACKAGES; `load_entries()`
imports every module of those packages once (lazily, on the first lookup), so a new file
in one of them registers itself and no list elsewhere has to change.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

# Packages whose modules hold registered entries (imported on the first lookup).
ENTRY_PACKAGES = (
    "src.tasks",
    "src.models",
    "src.gd_paper.models",
    "src.probes",
    "src.systems",
    "src.jobs",
    "baselines",
    "analysis",
)

KINDS = {
    "system": "the papers' training regimes: settings, trainer and outputs of a run",
    "task": "in-context tasks (data generators)",
    "objective": "how a task's predictions are scored: training loss and reported error",
    "layout": "token layouts: how a task becomes a token sequence",
    "family": "model families: how layout, mixers, positions and blocks are assembled",
    "scoring": "attention scoring of the attention-only family's layers (linear = LSA, softmax)",
    "seq_mixer": "sequence mixers (attention and its relatives)",
    "dynamics_model": "linear-attention models of the training-dynamics study (Zhang et al., ICML 2025)",
    "nonlinear_model": "models of von Oswald et al.'s non-linear regression (MLP then LSA; features + GD)",
    "state_mixer": "state mixers (per-token MLPs)",
    "position": "position encodings",
    "norm": "normalisation layers",
    "baseline": "reference predictors (GD, least squares, ...)",
    "shift": "evaluation shifts: how a batch of prompts and queries is rewritten at evaluation time",
    "probe": "diagnostics computed at every log point (e.g. copy sensitivities)",
    "analysis": "per-run analyses, run at the end of a run when they apply",
    "executor": "where the runs of a study or sweep execute (local processes, Ray)",
}


class UnknownChoice(ValueError):
    """A name no registry entry has; the message is one line listing the accepted names."""


@dataclass(frozen=True)
class NoOptions:
    """The options of an entry that has none."""


@dataclass(frozen=True)
class Entry:
    kind: str
    name: str
    options: type  # a frozen dataclass; NoOptions when there are none
    build: Callable[..., Any]
    applies: Callable[[Any], bool] | None = None
    doc: str = ""

    def default_options(self):
        return self.options()

    def options_from_dict(self, raw: dict | None):
        """The options dataclass from a JSON mapping (unknown keys: UnknownChoice)."""
        raw = dict(raw or {})
        known = {f.name for f in dataclasses.fields(self.options)}
        extra = sorted(set(raw) - known)
        if extra:
            raise UnknownChoice(
                f"{self.kind} {self.name!r} has no option {extra[0]!r}; accepted: {', '.join(sorted(known)) or 'none'}"
            )
        return self.options(**raw)

    def is_applicable(self, settings) -> bool:
        return True if self.applies is None else bool(self.applies(settings))


def _origin(builder) -> tuple:
    """Where a builder is defined: the same entry imported twice (as __main__ by `python -m`
    and as its module by load_entries) is one entry, not a clash."""
    code = getattr(builder, "__code__", None)
    return (code.co_filename, code.co_firstlineno) if code else (id(builder),)


def did_you_mean(name, names) -> str:
    """ "; did you mean 'x'?" for the accepted name nearest a misspelt one (difflib), else ""."""
    import difflib

    near = difflib.get_close_matches(str(name), list(names), n=1, cutoff=0.75)
    return f"; did you mean {near[0]!r}?" if near else ""


def defined_in(entry: "Entry") -> tuple[str, int] | None:
    """(file, first line) of the code an entry runs: what its builder names (`defined_in`, e.g. a
    mixer's maker, set by register_mixer), else the builder itself; None for a builtin."""
    origin = getattr(entry.build, "defined_in", None) or _origin(entry.build)
    return origin if len(origin) == 2 else None


def entries_in(filename: str) -> list["Entry"]:
    """Every registered entry whose code is defined in `filename` (defined_in)."""
    return [
        e
        for reg in _REGISTRIES.values()
        for e in reg._entries.values()
        if (where := defined_in(e)) is not None and where[0] == filename
    ]


class Registry:
    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, Entry] = {}

    def register(
        self, name: str, options: type = NoOptions, *, applies: Callable[[Any], bool] | None = None, doc: str = ""
    ):
        """Decorator: register `builder` under `name`."""
        if not (dataclasses.is_dataclass(options) and options.__dataclass_params__.frozen):
            raise TypeError(f"{self.kind} {name!r}: options must be a frozen dataclass")

        def decorate(builder):
            old = self._entries.get(name)
            if old is not None and _origin(old.build) != _origin(builder):
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            text = doc or (builder.__doc__ or "").strip().splitlines()[0:1]
            self._entries[name] = Entry(
                self.kind, name, options, builder, applies, text if isinstance(text, str) else "".join(text)
            )
            return builder

        return decorate

    def get(self, name: str) -> Entry:
        load_entries()
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise UnknownChoice(
                f"{self.kind} {name!r} is unknown; accepted: "
                f"{', '.join(self.names()) or 'none registered'}{did_you_mean(name, self.names())}"
            ) from None

    def names(self) -> list[str]:
        load_entries()
        return sorted(self._entries)

    def __iter__(self) -> Iterator[Entry]:
        return iter([self._entries[n] for n in self.names()])

    def __contains__(self, name: str) -> bool:
        load_entries()
        return name in self._entries

    def applicable(self, settings) -> list[Entry]:
        """The entries whose `applies(settings)` holds (all entries without a predicate)."""
        return [e for e in self if e.is_applicable(settings)]


_REGISTRIES: dict[str, Registry] = {kind: Registry(kind) for kind in KINDS}
_LOADED: list[bool] = [False]


def registry(kind: str) -> Registry:
    try:
        return _REGISTRIES[kind]
    except KeyError:
        raise UnknownChoice(f"registry kind {kind!r} is unknown; accepted: {', '.join(KINDS)}") from None


def load_entries() -> None:
    """Import every module of ENTRY_PACKAGES and their sub-packages once (they register their
    entries)."""
    if _LOADED[0]:
        return
    _LOADED[0] = True
    for package_name in ENTRY_PACKAGES:
        try:
            package = importlib.import_module(package_name)
        except ModuleNotFoundError as err:
            if err.name == package_name:
                continue
            raise
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{package_name}."):
            if not info.name.rsplit(".", 1)[-1].startswith("_"):
                importlib.import_module(info.name)


@dataclass(frozen=True)
class Choice:
    """A registry name with its options: what a Settings tree stores for each choice."""

    name: str
    options: Any = field(default_factory=NoOptions)

    def entry(self, kind: str) -> Entry:
        return registry(kind).get(self.name)

    def to_dict(self) -> dict:
        return {"name": self.name, "options": dataclasses.asdict(self.options)}

    @staticmethod
    def from_dict(kind: str, raw: dict | str) -> "Choice":
        """From {"name", "options"} (or a bare name: default options)."""
        if isinstance(raw, str):
            raw = {"name": raw}
        entry = registry(kind).get(raw["name"])
        return Choice(entry.name, entry.options_from_dict(raw.get("options")))


def choice(kind: str, name: str, **options) -> Choice:
    """A Choice of registry `kind` with the entry's options (defaults overridden)."""
    entry = registry(kind).get(name)
    return Choice(name, dataclasses.replace(entry.default_options(), **options))


def describe_all() -> str:
    """Every registry with its names and one-line docs (the text of `--choices`)."""
    lines = []
    for kind, what in KINDS.items():
        reg = registry(kind)
        names = reg.names()
        if not names:
            continue
        lines.append(f"{kind}: {what}")
        for entry in reg:
            opts = ", ".join(
                f"{f.name}={f.default!r}"
                for f in dataclasses.fields(entry.options)
                if f.default is not dataclasses.MISSING
            )
            lines.append(f"  {entry.name:22s} {entry.doc}" + (f"  [{opts}]" if opts else "") + state_note(entry))
    return "\n".join(lines)


def state_note(entry: Entry) -> str:
    """ "  [state: <formula>]" for a sequence mixer that declares its recurrent state
    (src.models.mixers.kit.register_mixer), "" for any other entry."""
    state = getattr(entry.build, "state_doc", "")
    return f"  [state: {state}]" if state else ""
