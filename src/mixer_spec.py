"""A sequence mixer as typed in a flag, a study's list or a YAML file: `name` or
`name:option=value[:option=value ...]` (e.g. `base_conv:kernel_size=-1`), and hybrid stacks of them
joined by a separator (the recipe's `--model.seq_mixers base_conv,based`, a study's
`base_conv+based`). One resolver for every place that names mixers; errors are one line."""

from __future__ import annotations

from src.flags import UsageError
from src.registry import Choice, UnknownChoice, registry

# the original's names -> registry entries (a table, never a branch): the ICL benchmark calls causal softmax
# attention `attention`
ALIASES = {"seq_mixer": {"attention": "softmax_causal"}}


def registry_entry(kind: str, name: str):
    """The registry entry of `kind` that `name` names, the original's aliases applied
    (`attention` is softmax_causal)."""
    return registry(kind).get(ALIASES.get(kind, {}).get(name, name))


def seq_mixer_names() -> list[str]:
    """Every registered sequence mixer, the original's aliases first."""
    aliases = ALIASES["seq_mixer"]
    return list(aliases) + [n for n in registry("seq_mixer").names() if n not in aliases.values()]


def _literal(text: str):
    """An option's value as typed: an integer, a number, true/false, else the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def mixer_of(text: str, flag: str, typed: str | None = None) -> Choice:
    """A sequence mixer spelled `name` or `name:option=value[:option=value ...]` (`attention` is
    causal softmax; e.g. `base_conv:kernel_size=-1`): the Choice with its options checked
    (UsageError, one line, naming `flag` and what was `typed` there, by default `text`)."""
    typed = text if typed is None else typed
    name, *pairs = [part.strip() for part in text.strip().split(":")]
    try:
        entry = registry("seq_mixer").get(ALIASES["seq_mixer"].get(name, name))
    except UnknownChoice:
        raise UsageError(f"{flag}={typed!r}: {name!r} is unknown; accepted: {', '.join(seq_mixer_names())}") from None
    raw = {}
    for pair in pairs:
        key, equals, value = (part.strip() for part in pair.partition("="))
        if not (key and equals and value):
            raise UsageError(
                f"{flag}={typed!r}: {pair!r} is not accepted; accepted: name:option=value[:option=value ...]"
            )
        raw[key] = _literal(value)
    try:
        options = entry.options_from_dict(raw)
        if hasattr(options, "check"):
            options.check()
    except (ValueError, TypeError) as err:
        raise UsageError(f"{flag}={typed!r}: {name}: {err}") from None
    return Choice(entry.name, options)


def mixer_stack(text: str, separator: str, flag: str, chosen: Choice | None = None) -> tuple[Choice, ...]:
    """The layers of a hybrid stack, `separator`-joined mixer_of spellings (the recipe's
    `base_conv,based`, a study's `base_conv+based`): layer i takes entry i mod n. A bare name that
    is the chosen model.seq_mixer takes its options."""
    parts = [part.strip() for part in text.split(separator)] if text.strip() else []
    if any(not part for part in parts):
        raise UsageError(f"{flag}={text!r}: an empty entry; accepted: mixers joined by {separator!r}")
    return tuple(
        chosen
        if chosen is not None and ALIASES["seq_mixer"].get(part, part) == chosen.name
        else mixer_of(part, flag, text)
        for part in parts
    )


def stack_word(text: str, separator: str = ",") -> str:
    """A hybrid stack as a run directory's name spells it: its entries joined by `+`, an entry's
    options after dots (`ema,attention` -> `ema+attention`; `base_conv,base_conv:kernel_size=-1`
    -> `base_conv+base_conv.kernel_size-1`): no `:`, `,` or `=` in a path."""
    entries = []
    for part in text.split(separator):
        name, *pairs = [piece.strip() for piece in part.strip().split(":")]
        options = ["".join(piece.strip() for piece in pair.partition("=")[::2]) for pair in pairs]
        entries.append(".".join([name, *options]))
    return "+".join(entries)
