"""The train settings every system shares, declared and checked once. Each system's `train`
subclasses TrainLoop (every system) or StepTrain (the systems that draw a fresh batch every step)
and adds its own fields; it may give a shared field another default, and its settings' `check()`
checks only the fields it adds. Messages name the field alone: the settings tree prefixes
`train.` (src.settings.check_tree runs a part's own `check`).

    @dataclass(frozen=True)
    class MyTrain(StepTrain):
        steps: int = 20_000          # another default
        adam_b2: float = 0.98        # an optimizer knob, checked here too (OPTIMIZER_KNOBS)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from src.bounds import RANGES, check_sizes
from src.settings import EVAL_SEED, SettingsError, is_number, require, require_int, require_number


@dataclass(frozen=True)
class TrainLoop:
    """The `train` fields of every system."""

    learning_rate: float = 1e-3
    seed: int = 0  # initialisation and the training data
    log_every: int = 100  # steps (epochs) between log points
    checkpoint_every: int = 1000  # steps between checkpoints (and at the end); 0: only at the end
    # scales of `train` that enter the computation as floats: each must be representable in it
    scales: ClassVar[tuple[str, ...]] = ("learning_rate",)

    def check(self) -> None:
        require_number("learning_rate", self.learning_rate, 0, open_low=True)
        most_steps = RANGES["steps"][1]
        for name, low in LOOP_INTERVALS.items():
            if hasattr(self, name):
                require_int(name, getattr(self, name), low, most_steps)
        _check_ranges(("seed", "seed", self.seed))
        precision = np.float64 if getattr(self, "float64", False) is True else np.float32
        largest = float(np.finfo(precision).max)
        for name in self.scales:
            value = getattr(self, name, None)
            if is_number(value) and abs(value) > largest:
                require(
                    False,
                    name,
                    value,
                    f"a number of magnitude at most {largest:.6g} (the largest {precision.__name__} the run trains in)",
                )


@dataclass(frozen=True)
class StepTrain(TrainLoop):
    """The train fields of the systems that draw a fresh batch every step and score a fixed eval
    set (lsa, gpt2, lm, nonlinear), and the optimizer knobs several of them have, checked once."""

    steps: int = 1000
    batch_size: int = 64
    grad_clip: float = 10.0  # global-norm clipping of the gradient; 0: none
    eval_size: int = 1000
    eval_seed: int = EVAL_SEED  # eval tasks are drawn from this seed, whatever `seed` is

    def check(self) -> None:
        super().check()
        _check_ranges(
            ("steps", "steps", self.steps),
            ("batch_size", "batch_size", self.batch_size),
            ("eval_size", "eval_size", self.eval_size),
            ("seed", "eval_seed", self.eval_seed),
        )
        require_number("grad_clip", self.grad_clip, 0)
        for name, (low, high, open_high, none_allowed) in OPTIMIZER_KNOBS.items():
            value = getattr(self, name, None)
            if hasattr(self, name) and not (value is None and none_allowed):
                require_number(name, value, low, high=high, open_high=open_high)


# intervals of the loop a system's train may have, with their least value (0: never); the most is
# a run's most steps (src.bounds.RANGES["steps"])
LOOP_INTERVALS = {"log_every": 1, "checkpoint_every": 0, "keep_every": 0}
# optimizer knobs some systems' train have: name -> (least, most or None, most excluded, None
# allowed: warmup_fraction None is a constant rate)
OPTIMIZER_KNOBS = {
    "warmup_fraction": (0, 1, False, True),
    "weight_decay": (0, None, False, False),
    "adam_b1": (0, 1, True, False),
    "adam_b2": (0, 1, True, False),
}


def _check_ranges(*named: tuple[str, str, int]) -> None:
    """src.bounds.check_sizes as a SettingsError."""
    try:
        check_sizes(*named)
    except ValueError as err:
        raise SettingsError(str(err)) from None
