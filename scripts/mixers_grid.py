"""The sequence-mixer study's grid (scripts/mixers.py, scripts/zoo.py): what it trains on MQAR, as
Cells (sequence length T, κ pairs, batch, steps, rates) and a Grid (vocabulary, cells, widths, heads,
learning rates, block, per-mixer rates), read from a `--config` YAML file by read_grid; mixer_choices
reads a study's mixer spelling (one mixer or a hybrid stack a+b) into registry choices.
"""

from __future__ import annotations

from dataclasses import dataclass

from src.flags import UsageError
from src.mixer_spec import mixer_stack
from src.models.sequence_presets import BLOCKS
from src.registry import Choice
from src.yaml_includes import load as load_yaml

WIDTHS, PAIRS, MQAR_STEPS, MQAR_HEADS = (64,), (4, 8, 16), 1500, 1
QUICK = {"widths": (16,), "pairs": (4,), "mqar_steps": 40, "boolean_steps": 40, "boolean": ("conjunction",)}


@dataclass(frozen=True)
class Cell:
    """One MQAR cell: sequence length T, κ pairs, and the batch and steps it trains at (None: the
    recipe's batch)."""

    seq_len: int = 64
    kappa: int = 4
    batch_size: int | None = None
    steps: int = MQAR_STEPS
    learning_rates: tuple | None = None  # this cell's rate set (None: the grid's)


@dataclass(frozen=True)
class Grid:
    """What the study trains on MQAR (the defaults are `make mixers`'; a `--config` YAML file sets any
    of these keys, configs/paper/mixers.yaml being Zoology's figure 2). Several learning rates: each
    cell reports the best of them (Zoology's protocol); None is the recipe's default rate. `block`:
    our block, or Zoology's own (src.models.sequence_presets.with_block)."""

    vocab_size: int = 256
    cells: tuple = tuple(Cell(kappa=k) for k in PAIRS)
    widths: tuple = WIDTHS
    heads: int = MQAR_HEADS
    learning_rates: tuple = (None,)
    boolean: bool = False
    block: str = "ours"  # the models' block (src.models.sequence_presets.with_block): ours, or zoology (Zoology's own)
    rates: tuple = ()  # ((mixer, rates), ...): a recorded rate set per mixer, over the cell's and the grid's

    @property
    def pairs(self) -> tuple:
        return tuple(c.kappa for c in self.cells)

    def rates_for(self, mixer: str, cell: Cell) -> tuple:
        """The learning rates (mixer, cell) is trained at, the best of which it reports: the mixer's
        recorded set, else the cell's, else the grid's."""
        return dict(self.rates).get(mixer) or cell.learning_rates or self.learning_rates


QUICK_GRID = Grid(cells=(Cell(kappa=4, steps=QUICK["mqar_steps"]),), widths=QUICK["widths"], boolean=True)
GRID_KEYS = {"vocab_size", "cells", "widths", "heads", "learning_rates", "boolean", "block", "rates"}
CELL_KEYS = {"seq_len", "kappa", "batch_size", "steps", "learning_rates"}


def read_mapping(path: str, keys: set[str]) -> dict:
    """A study grid's YAML file as a mapping whose keys are all in `keys` (UsageError, one line,
    naming the file or the key and what is accepted)."""
    raw = load_yaml(path)
    if not isinstance(raw, dict):
        raise UsageError(
            f"--config={path!r}: the file holds {type(raw).__name__}; accepted: a mapping of {', '.join(sorted(keys))}"
        )
    unknown = sorted(set(raw) - keys)
    if unknown:
        raise UsageError(f"{path}: key {unknown[0]!r} is unknown; accepted: {', '.join(sorted(keys))}")
    return raw


def read_grid(path: str) -> Grid:
    """The Grid of a YAML file (UsageError, one line, naming the key, the value and what is accepted)."""
    return Grid(**{**Grid().__dict__, **grid_values(path, read_mapping(path, GRID_KEYS))})


def grid_values(path: str, raw: dict) -> dict:
    """The Grid's fields the file sets, each checked, in the order the checks have always run."""
    values = {}
    if "vocab_size" in raw:
        values["vocab_size"] = positive_int(path, "vocab_size", raw["vocab_size"])
    if "heads" in raw:
        values["heads"] = positive_int(path, "heads", raw["heads"])
    if "cells" in raw:
        values["cells"] = listed(path, raw, "cells", cell_of)
    if "widths" in raw:
        values["widths"] = listed(path, raw, "widths", positive_int)
    if "learning_rates" in raw:
        values["learning_rates"] = rate_list(path, "learning_rates", raw["learning_rates"])
    if "rates" in raw:
        values["rates"] = mixer_rates(path, raw["rates"])
    if "boolean" in raw:
        if not isinstance(raw["boolean"], bool):
            raise UsageError(f"{path}: boolean={raw['boolean']!r} is not accepted; accepted: true or false")
        values["boolean"] = raw["boolean"]
    if "block" in raw:
        if raw["block"] not in BLOCKS:
            raise UsageError(f"{path}: block={raw['block']!r} is not accepted; accepted: {', '.join(BLOCKS)}")
        values["block"] = raw["block"]
    return values


def positive_int(path: str, key: str, value) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise UsageError(f"{path}: {key}={value!r} is not accepted; accepted: an integer >= 1")
    return value


def listed(path: str, raw: dict, key: str, check) -> tuple:
    """raw[key], a non-empty list, each item checked by check(path, f"{key}[i]", item)."""
    value = raw.get(key)
    if not isinstance(value, list) or not value:
        raise UsageError(f"{path}: {key}={value!r} is not accepted; accepted: a non-empty list")
    return tuple(check(path, f"{key}[{i}]", v) for i, v in enumerate(value))


def rate(path: str, key: str, value) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
        raise UsageError(f"{path}: {key}={value!r} is not accepted; accepted: a number > 0")
    return float(value)


def rate_list(path: str, key: str, value) -> tuple:
    if not isinstance(value, list) or not value:
        raise UsageError(f"{path}: {key}={value!r} is not accepted; accepted: a non-empty list of rates")
    rates = tuple(rate(path, f"{key}[{i}]", v) for i, v in enumerate(value))
    if len(set(rates)) != len(rates):
        raise UsageError(f"{path}: {key}={value!r} is not accepted; accepted: rates without repeats")
    return rates


def cell_of(path: str, key: str, value) -> Cell:
    if not isinstance(value, dict) or set(value) - CELL_KEYS or "kappa" not in value:
        raise UsageError(
            f"{path}: {key}={value!r} is not accepted; accepted: a mapping with kappa and any "
            f"of {', '.join(sorted(CELL_KEYS - {'kappa'}))}"
        )
    return Cell(
        **{
            k: rate_list(path, f"{key}.{k}", v) if k == "learning_rates" else positive_int(path, f"{key}.{k}", v)
            for k, v in value.items()
        }
    )


def mixer_rates(path: str, value) -> tuple:
    """The `rates` mapping as ((mixer, rates), ...), each mixer a study's spelling."""
    if not isinstance(value, dict) or not value:
        raise UsageError(
            f"{path}: rates={value!r} is not accepted; accepted: a mapping of mixer "
            "(as --mixers spells it) to its list of learning rates"
        )
    for mixer in value:
        mixer_choices(str(mixer))
    return tuple((str(m), rate_list(path, f"rates.{m}", v)) for m, v in value.items())


def mixer_choices(mixer: str) -> tuple[Choice, tuple[Choice, ...]]:
    """(seq_mixer, seq_mixers) of a study's mixer spelling: one mixer (`name` or
    `name:option=value`), or a hybrid stack `a+b` (layer i takes the i-th, repeating; seq_mixer is
    the last)."""
    layers = mixer_stack(mixer, "+", "--mixers")
    return layers[-1], (layers if len(layers) > 1 else ())
