"""Zoology's gated convolutions (HazyResearch/zoology, `zoology/mixers/hyena.py`, `h3/`), registry
"seq_mixer" `hyena` and `h3`. Each maps x [B, T, D] -> [B, T, D] causally; neither has a
nonlinearity besides its gates.

  hyena  Hyena (Poli et al. 2023) of order 2: (x₁, x₂, v) = short_conv₃(x W_in + b) split in
         three [D] parts; y = x₂ ⊙ (h ∗ (x₁ ⊙ v) + D_skip ⊙ x₁ ⊙ v); out = y W_out + b. h [T, D] is
         base_conv's implicit long filter (an MLP with one shared sine frequency on a positional
         embedding, an exponential decay over the channels; src/models/mixers/convolutions.py),
         `filter_order` wide (Zoology's default 64), and ∗ the causal convolution (an FFT from
         FFT_FROM tokens on). Zoology trains the positional embedding z_t the filter reads; here
         it is fixed at Zoology's initial values (as base_conv's).
  h3     H3 (Fu et al. 2023, "Hungry Hungry Hippos"): q, k, v = x W + b; k ← shift-SSM(k) (a
         causal filter of N taps per channel, kernel_j = Σ_n B_n C_{n+j}, B starting at e₁, plus
         a skip D_k ⊙ k); per head (`head_dim` channels, H' = D / head_dim heads) the outer
         products k_t v_tᵀ [head_dim, head_dim] pass through a diagonal SSM (S4D, N/2 complex
         modes A_n = −½ + iπn, bilinear discretisation with step dt ~ logUniform(0.001, 0.1)):
         K[l] = 2 Re Σ_n C'_n dA_nˡ, dA = (1 + dt A/2)/(1 − dt A/2), C' = B C dt/(1 − dt A/2); plus a
         skip D ⊙ k vᵀ; o_t = q_tᵀ y_t per head; out = o W_out + b. Zoology's figure 2 uses
         d_state = T and head_dim 2. The heads come from head_dim, not from the model's n_head.
         Output channels are ordered (head, j) where Zoology's are (j, head): a permutation
         before the output projection, the same function class.

State per sequence and layer: hyena keeps every (gated) input of its long filter, T·D, and
its short filter's last (k − 1)·3D inputs; h3 keeps the shift-SSM's last N inputs per channel,
N·D, and the diagonal SSM's N/2 complex modes per entry of each head's [head_dim, head_dim]
product, head_dim·D·N reals (Zoology's `state_size` says D·N for h3: it leaves the second out).

Glossary: B batch, T tokens, D width, N state size, k short filter size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import haiku as hk
import jax.numpy as jnp
import numpy as np

from src.models.mixers.kit import register_mixer
from src.models.mixers.convolutions import ImplicitLongConv, ShortConv, causal_long_conv


def _positive_int(options, *names) -> None:
    for name in names:
        value = getattr(options, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}={value!r}; accepted: an integer >= 1")


@dataclass(frozen=True)
class HyenaOptions:
    filter_order: int = 64  # width of the long filter's MLP (Zoology's)
    short_filter_order: int = 3  # the short convolution over the three projections (tokens)
    max_length: int = 0  # the long filter's time scale; 0: the input's length

    def check(self) -> None:
        _positive_int(self, "filter_order", "short_filter_order")
        if isinstance(self.max_length, bool) or not isinstance(self.max_length, int) or self.max_length < 0:
            raise ValueError(f"max_length={self.max_length!r}; accepted: an integer >= 0")


class Hyena(hk.Module):
    def __init__(self, options: HyenaOptions, name=None):
        super().__init__(name=name)
        self.options = options

    def __call__(self, x):
        t, d = x.shape[1], x.shape[2]
        o = self.options
        projected = ShortConv(o.short_filter_order, name="short_filter")(hk.Linear(3 * d, name="in_proj")(x))
        x1, x2, v = jnp.split(projected, 3, axis=-1)
        v = v * x1
        filt = ImplicitLongConv(o.filter_order, o.max_length, name="filter").filter(t, d)
        skip = hk.get_parameter("skip", [d], x.dtype, hk.initializers.RandomNormal(1.0))
        y = (causal_long_conv(v, filt) + skip * v) * x2
        return hk.Linear(d, name="out_proj")(y)


@dataclass(frozen=True)
class H3Options:
    d_state: int = 64  # N: the shift filter's taps and twice the diagonal SSM's modes (even)
    head_dim: int = 2  # channels per head of the k vᵀ products (Zoology's figure 2: 2)

    def check(self) -> None:
        _positive_int(self, "d_state", "head_dim")
        if self.d_state % 2:
            raise ValueError(f"d_state={self.d_state}; accepted: an even integer >= 2")


def shift_kernel(b, c):
    """kernel [N, D]: kernel_j = Σ_n b_n c_{n+j} per channel, b, c [D, N] (the shift SSM's
    convolution kernel; b = e₁ gives c itself)."""
    n = b.shape[-1]
    index = np.arange(n)[:, None] + np.arange(n)[None, :]  # [n, j] -> n + j
    padded = jnp.concatenate([c, jnp.zeros_like(c[:, :1])], -1)
    return jnp.einsum("dn,dnj->jd", b, padded[:, np.minimum(index, n)])


def diagonal_kernel(length: int, a_real, a_imag, b, c, log_dt):
    """K [length, H']: the diagonal SSM's convolution kernel, 2 Re Σ_n C'_n dA_nˡ (module
    docstring); a_*, b, c complex parts [H', N/2], log_dt [H']."""
    a = -jnp.exp(a_real) + 1j * a_imag
    dt_a = a * jnp.exp(log_dt)[:, None]
    d_a = (1 + dt_a / 2) / (1 - dt_a / 2)
    c_prime = b * c * jnp.exp(log_dt)[:, None] / (1 - dt_a / 2)
    powers = jnp.exp(jnp.arange(length)[:, None, None] * jnp.log(d_a)[None])  # [L, H', N/2]
    return 2 * jnp.real(jnp.sum(c_prime[None] * powers, -1))


class H3(hk.Module):
    def __init__(self, options: H3Options, name=None):
        super().__init__(name=name)
        self.options = options

    def __call__(self, x):
        b, t, d = x.shape
        n, size = self.options.d_state, self.options.head_dim
        if d % size:
            raise ValueError(f"head_dim={size}; accepted: a divisor of the width {d}")
        heads, modes = d // size, n // 2
        q, k, v = (hk.Linear(d, name=name)(x) for name in ("q", "k", "v"))
        # the shift SSM on k: B = e₁, C ~ U(±1/√N) per channel, and a skip
        shift_b = hk.get_parameter("shift_b", [d, n], x.dtype, lambda s, dt: jnp.zeros(s, dt).at[:, 0].set(1.0))
        shift_c = hk.get_parameter(
            "shift_c", [d, n], x.dtype, hk.initializers.RandomUniform(-1 / math.sqrt(n), 1 / math.sqrt(n))
        )
        shift_skip = hk.get_parameter("shift_skip", [d], x.dtype, hk.initializers.RandomNormal(1.0))
        kernel = shift_kernel(shift_b, shift_c)
        kernel = jnp.pad(kernel, ((0, max(t - n, 0)), (0, 0)))[:t]
        k = causal_long_conv(k, kernel) + shift_skip * k
        # the diagonal SSM over each head's k vᵀ
        a_real = hk.get_parameter("a_real", [heads, modes], x.dtype, hk.initializers.Constant(math.log(0.5)))
        a_imag = hk.get_parameter(
            "a_imag", [heads, modes], x.dtype, lambda s, dt: jnp.broadcast_to(math.pi * jnp.arange(s[1], dtype=dt), s)
        )
        b_re = hk.get_parameter("b_re", [heads, modes], x.dtype, jnp.ones)
        b_im = hk.get_parameter("b_im", [heads, modes], x.dtype, jnp.zeros)
        c_re, c_im = (
            hk.get_parameter(name, [heads, modes], x.dtype, hk.initializers.RandomNormal(math.sqrt(0.5)))
            for name in ("c_re", "c_im")
        )
        log_dt = hk.get_parameter(
            "log_dt", [heads], x.dtype, hk.initializers.RandomUniform(math.log(0.001), math.log(0.1))
        )
        skip = hk.get_parameter("skip", [heads], x.dtype, hk.initializers.RandomNormal(1.0))
        ssm = diagonal_kernel(t, a_real, a_imag, b_re + 1j * b_im, c_re + 1j * c_im, log_dt)  # [T, H']
        kv = (k.reshape(b, t, heads, size, 1) * v.reshape(b, t, heads, 1, size)).reshape(b, t, heads, size * size)
        filt = jnp.repeat(ssm, size * size, axis=1)  # the head's kernel for each entry
        y = causal_long_conv(kv.reshape(b, t, -1), filt).reshape(kv.shape) + skip[:, None] * kv
        o = jnp.einsum("bthi,bthij->bthj", q.reshape(b, t, heads, size), y.reshape(b, t, heads, size, size))
        return hk.Linear(d, name="out")(o.reshape(b, t, d))


register_mixer(
    "hyena",
    HyenaOptions,
    "Zoology: Hyena of order 2, gates around an implicit long convolution (FFT on long inputs)",
    lambda o, h, n, p: Hyena(o, name=n),
    state=lambda o, d, h, t: t * d + (o.short_filter_order - 1) * 3 * d,
    state_doc="T·D + (short_filter_order − 1)·3D",
)
register_mixer(
    "h3",
    H3Options,
    "Zoology: H3, a shift SSM on k and a diagonal SSM over each head's k vᵀ, read by q",
    lambda o, h, n, p: H3(o, name=n),
    state=lambda o, d, h, t: o.d_state * d * (1 + o.head_dim),
    state_doc="N·D·(1 + head_dim)",
)
