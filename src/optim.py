"""The one optimizer factory: every system (and every fit of a baseline) maps its settings onto
`Optimizer` and gets its optax transformation here.

    make_optimizer(Optimizer("adam", 1e-3, b2=0.98, grad_clip=10.0), total_steps)   # the paper's
    make_optimizer(Optimizer("adamw", 3e-3, weight_decay=0.1, grad_clip=3.0, warmup_fraction=0.03), steps)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import jax
import optax


@dataclass(frozen=True)
class Optimizer:
    """What the factory needs: every system maps its own settings onto this."""

    name: str  # adam | adamw | sgd
    learning_rate: float
    b1: float = 0.9
    b2: float = 0.999
    weight_decay: float = 0.0  # adamw
    grad_clip: float = 0.0  # global-norm clipping; 0 = none
    warmup_fraction: float | None = None  # linear warm-up then `decay`; None = constant
    decay: str = "cosine"  # after the warm-up: cosine (to 0) | linear (to 0, Hugging Face's default)


OPTIMIZERS = ("adam", "adamw", "sgd")


def _warmup_cosine(peak: float, fraction: float, total_steps: int):
    warmup = max(1, int(fraction * total_steps))
    return optax.warmup_cosine_decay_schedule(0.0, peak, warmup, max(total_steps, warmup + 1))


def _warmup_linear(peak: float, fraction: float, total_steps: int):
    """Hugging Face's get_linear_schedule_with_warmup: ⌈fraction · steps⌉ warm-up steps."""
    warmup = math.ceil(fraction * total_steps)
    return optax.join_schedules(
        [
            optax.linear_schedule(0.0, peak, max(warmup, 1)),
            optax.linear_schedule(peak, 0.0, max(total_steps - warmup, 1)),
        ],
        [warmup],
    )


# Optimizer.decay -> (peak rate, warm-up fraction, steps) -> the schedule
WARMUP_DECAYS = {"cosine": _warmup_cosine, "linear": _warmup_linear}


def make_optimizer(opt: Optimizer, total_steps: int) -> optax.GradientTransformation:
    """The optax transformation of `opt` for a run of `total_steps` steps."""
    rate = opt.learning_rate
    if opt.warmup_fraction is not None:
        rate = WARMUP_DECAYS[opt.decay](opt.learning_rate, opt.warmup_fraction, total_steps)
    core = {
        "adam": lambda: optax.adam(rate, b1=opt.b1, b2=opt.b2),
        "adamw": lambda: optax.adamw(rate, b1=opt.b1, b2=opt.b2, weight_decay=opt.weight_decay),
        "sgd": lambda: optax.sgd(rate),
    }[opt.name]()
    if opt.grad_clip > 0:
        return optax.chain(optax.clip_by_global_norm(opt.grad_clip), core)
    return core


def gradient_step(loss_fn: Callable[..., jax.Array], optimizer: optax.GradientTransformation):
    """The one gradient step of the workbench, the system's loss injected:
    step(params, opt_state, *batch) -> (params, opt_state, loss), with loss = loss_fn(params, *batch)
    (a scalar) at the parameters before the update. Pure: call it inside a jitted scan."""

    def step(params, opt_state, *batch):
        value, grads = jax.value_and_grad(loss_fn)(params, *batch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    return step
