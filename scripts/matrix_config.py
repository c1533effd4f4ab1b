"""The matrix study's config (scripts/matrix.py): the base settings (the settings schema of a run's
config.json, a gpt2 system) and, beside them, the study's own `matrix:` mapping read into a Protocol
(mixers, seeds, steps, learning_rates); mixer_names checks a --mixers list of mixer spellings.
"""

from __future__ import annotations

from dataclasses import dataclass

from src.flags import SEED_LIMIT, UsageError, refuse_repeats
from src.jobs.study import read_settings_mapping
from src.mixer_spec import mixer_of
from src.registry import registry
from src.systems import settings_from_file
from src.systems.gpt2 import GPT2Settings

STUDY_KEY = "matrix"  # the study's own mapping in a config, beside the settings
PROTOCOL_KEYS = ("mixers", "seeds", "steps", "learning_rates")


@dataclass(frozen=True)
class Protocol:
    """A config's `matrix:` mapping (None: the key is absent). `steps` and `learning_rates` replace
    the settings' train.steps and train.learning_rate in every run, each rate a run of its own."""

    mixers: tuple[str, ...] | None = None
    seeds: tuple[int, ...] | None = None
    steps: int | None = None
    learning_rates: tuple[float, ...] | None = None

    @property
    def varies(self) -> bool:
        """Whether the runs differ from the base settings' protocol (another name and place)."""
        return self.steps is not None or self.learning_rates is not None


def mixer_names(text: str | None, flag: str = "--mixers") -> list[str]:
    """--mixers: registered sequence mixers, each `name` or `name:option=value[:...]` (default: all
    of them, by name; UsageError, one line). A bare name stays as typed, so the default runs keep
    their names and settings."""
    known = registry("seq_mixer").names()
    names = [m.strip() for m in (text or ",".join(known)).split(",") if m.strip()]
    layers = [part.strip() for m in names for part in m.split("+")]
    unknown = [m for m in layers if m.split(":")[0].strip() not in known]
    if unknown or not names:
        raise UsageError(
            f"{flag}={text!r} is not accepted; accepted: a comma list of {', '.join(known)} "
            "(each optionally name:option=value[:option=value ...]; a hybrid stack: joined by '+')"
        )
    refuse_repeats(flag, text, names)
    for layer in layers:
        mixer_of(layer, flag, text)  # its options checked (one line)
    return names


def read_protocol(block, where: str) -> Protocol:
    """The `matrix:` mapping of a config (None: absent), every key checked (UsageError, one line,
    naming the file, the key, the value and what is accepted)."""
    if block is None:
        return Protocol()
    if not isinstance(block, dict) or not block:
        raise UsageError(
            f"{where}: {STUDY_KEY}={block!r} is not accepted; accepted: a mapping of any of {', '.join(PROTOCOL_KEYS)}"
        )
    unknown = sorted(set(map(str, block)) - set(PROTOCOL_KEYS))
    if unknown:
        raise UsageError(f"{where}: {STUDY_KEY}.{unknown[0]} is unknown; accepted: {', '.join(PROTOCOL_KEYS)}")

    def listed(key: str, accepted: str, check) -> tuple:
        value = block[key]
        if (
            not isinstance(value, list)
            or not value
            or not all(check(v) for v in value)
            or len(set(map(repr, value))) != len(value)
        ):
            raise UsageError(
                f"{where}: {STUDY_KEY}.{key}={value!r} is not accepted; accepted: a non-empty "
                f"list of {accepted}, none twice"
            )
        return tuple(value)

    def is_int(v, low, high=None) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= low and (high is None or v <= high)

    values = {}
    if "mixers" in block:
        values["mixers"] = listed(
            "mixers", "mixer spellings (name or name:option=value)", lambda v: isinstance(v, str) and v.strip()
        )
        mixer_names(",".join(values["mixers"]), f"{where}: {STUDY_KEY}.mixers")
    if "seeds" in block:
        values["seeds"] = listed("seeds", f"integers in [0, {SEED_LIMIT - 1}]", lambda v: is_int(v, 0, SEED_LIMIT - 1))
    if "steps" in block:
        if not is_int(block["steps"], 1):
            raise UsageError(
                f"{where}: {STUDY_KEY}.steps={block['steps']!r} is not accepted; accepted: an integer >= 1"
            )
        values["steps"] = block["steps"]
    if "learning_rates" in block:
        values["learning_rates"] = tuple(
            float(r)
            for r in listed(
                "learning_rates",
                "numbers in (0, 1]",
                lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 1,
            )
        )
    return Protocol(**values)


def read_config(path: str):
    """(base settings, Protocol) of a matrix config: the settings schema of a run's config.json,
    optionally with the study's `matrix:` mapping beside it (UsageError, one line)."""
    raw = read_settings_mapping(path)
    block = raw.pop(STUDY_KEY, None) if isinstance(raw, dict) else None
    protocol = read_protocol(block, f"--config={path!r}")
    base = settings_from_file(raw, f"--config={path!r}")
    if not isinstance(base, GPT2Settings):
        raise UsageError(
            f"--config={path!r}: system={base.system!r} is not accepted; accepted: gpt2 (a "
            "sequence model on (x, y) pairs)"
        )
    return base, protocol
