"""Non-linear in-context regression for von Oswald et al.'s features-then-GD experiment (the
paper's §"non-linear regression"; the reference notebook non_linear_regression.ipynb).

  sine_regression        y = A sin(x + φ), x ~ U(−a/2, a/2) (d = 1, a = 10), A ~ U(0.1, 0.5),
                         φ ~ U(0, π): the reference notebook's tasks. With `shared_draw` the
                         amplitude and phase come from ONE uniform number u (A = 0.1 + 0.4 u,
                         φ = π u), as the reference code draws them (both from the same key), so
                         its tasks form a one-parameter family; by default they are independent.
  random_mlp_regression  y = √(2/h) Σ_k v_k relu(w_k·x + b_k), x ~ U(−a/2, a/2)^d, w_k ~ N(0, I_d),
                         b_k ~ U(−a/2, a/2), v_k ~ N(0, 1): a small random ReLU network per task
                         (Garg et al.'s relu_2nn scaling, with biases so that d = 1 has kinks
                         inside the input range).

Every task is N context pairs and one query from the same function; `alpha` scales the input
range (out-of-distribution tests). Pure, jittable functions of a key and static sizes.
Glossary of shapes: B tasks, N context pairs, d input dimension, h hidden units.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, ClassVar

import jax
import jax.numpy as jnp

from src.registry import registry
from src.settings import require, require_int, require_number
from src.tasks.pairs import PairPrompt, pair_prompt


@dataclass(frozen=True)
class SineOptions:
    """y = A sin(x + φ) on x ~ U(−a/2, a/2), one input dimension."""

    objective: ClassVar[str] = "query_half_mse"  # the paper's ½ mean (ŷ − y_q)²
    num_context: int = 10  # N
    input_range: float = 10.0  # a
    amplitude_low: float = 0.1
    amplitude_high: float = 0.5
    phase_high: float = math.pi  # φ ~ U(0, phase_high)
    shared_draw: bool = False  # the reference code's A and φ from one uniform number

    @property
    def d(self) -> int:
        return 1

    def check(self) -> None:
        require_int("num_context", self.num_context, 1)
        require_number("input_range", self.input_range, 0, open_low=True)
        require_number("amplitude_low", self.amplitude_low, 0)
        require(
            self.amplitude_high > self.amplitude_low,
            "amplitude_high",
            self.amplitude_high,
            f"a number > amplitude_low={self.amplitude_low}",
        )
        require_number("phase_high", self.phase_high, 0)

    def function(self, key: jax.Array, batch_size: int) -> Callable[[jax.Array], jax.Array]:
        """B random functions: f(x [B, M, 1]) -> y [B, M]."""
        key_a, key_p = jax.random.split(key)
        u_a = jax.random.uniform(key_a, (batch_size, 1))
        u_p = u_a if self.shared_draw else jax.random.uniform(key_p, (batch_size, 1))
        amplitude = self.amplitude_low + (self.amplitude_high - self.amplitude_low) * u_a
        phase = self.phase_high * u_p
        return lambda x: amplitude * jnp.sin(x[..., 0] + phase)


@dataclass(frozen=True)
class RandomMLPOptions:
    """y = √(2/h) Σ_k v_k relu(w_k·x + b_k) on x ~ U(−a/2, a/2)^d."""

    objective: ClassVar[str] = "query_half_mse"
    num_context: int = 10  # N
    d: int = 1
    hidden: int = 8  # h
    input_range: float = 2.0  # a

    def check(self) -> None:
        require_int("num_context", self.num_context, 1)
        require_int("d", self.d, 1)
        require_int("hidden", self.hidden, 1)
        require_number("input_range", self.input_range, 0, open_low=True)

    def function(self, key: jax.Array, batch_size: int) -> Callable[[jax.Array], jax.Array]:
        key_w, key_b, key_v = jax.random.split(key, 3)
        h, half = self.hidden, self.input_range / 2.0
        w = jax.random.normal(key_w, (batch_size, h, self.d))
        b = jax.random.uniform(key_b, (batch_size, 1, h), minval=-half, maxval=half)
        v = jax.random.normal(key_v, (batch_size, 1, h))
        scale = math.sqrt(2.0 / h)
        return lambda x: scale * jnp.sum(v * jax.nn.relu(jnp.einsum("bmd,bhd->bmh", x, w) + b), -1)


def sample_function_tasks(key: jax.Array, batch_size: int, options, alpha: float = 1.0) -> PairPrompt:
    """Draw B tasks of `options` (SineOptions | RandomMLPOptions): N context pairs and a query
    from one random function each, inputs ~ U(−alpha·a/2, alpha·a/2)^d (prompts of N + 1
    points, the query last, without task vectors: w None)."""
    key_f, key_x = jax.random.split(key)
    n, d, half = options.num_context, options.d, alpha * options.input_range / 2.0
    f = options.function(key_f, batch_size)
    x = jax.random.uniform(key_x, (batch_size, n + 1, d), minval=-half, maxval=half)
    y = f(x)
    return pair_prompt(x, y)


def _register(name: str, options: type, doc: str) -> None:
    registry("task").register(name, options, doc=doc)(
        lambda opts: lambda key, batch_size, alpha=1.0: sample_function_tasks(key, batch_size, opts, alpha)
    )


_register(
    "sine_regression",
    SineOptions,
    "von Oswald et al. (non-linear): y = A sin(x + phase), A ~ U(0.1, 0.5), phase ~ U(0, pi)",
)
_register(
    "random_mlp_regression",
    RandomMLPOptions,
    "a random one-hidden-layer ReLU network per task (von Oswald et al.'s non-linear setting)",
)
