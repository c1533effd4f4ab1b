"""Convolution mixers of Zoology (HazyResearch/zoology, `zoology/mixers/base_conv.py`,
`convolution.py`), registry "seq_mixer". Each maps x [B, T, D] -> [B, T, D] causally.

  short_conv  a depthwise causal convolution over the last `kernel_size` tokens, with a bias:
              y_t = b + Σ_{j<k} w_j ⊙ x_{t−j}   (Zoology's ShortConvolution, a Conv1d with
              groups = D, padding k − 1, cut to T)
  base_conv   BaseConv (Arora et al. 2023, "Zoology"): y = conv(x) ⊙ (x W + c) + x, where conv is
              the short convolution above (`kernel_size` ≥ 1, Zoology's default 3) or, with
              `kernel_size: -1`, an implicit long convolution (Hyena's filter): a filter
              h [T, D] = MLP(z_t) ⊙ exp(−t |δ|) of a positional embedding z_t = (t, cos ωt', −sin ωt')
              through Linear(3, o), sin(f ⊙ ·), two Linear(o, o) + the same sin, Linear(o, D) (no
              bias; o = `filter_order`, f one trainable frequency vector shared by the three sines),
              applied as y_t = Σ_{s≤t} h_{t−s} ⊙ x_s + x_t (the residual of Zoology's fft_conv),
              through an FFT from `FFT_FROM` tokens on and as one [T, T] product below.

The long filter's time axis is normalised by `max_length` (0, the default: the length of the
call, as Zoology builds it with l_max = the input length; a positive value fixes it, so that a
model evaluated past its trained length keeps its filter; longer inputs are refused).
Zoology's BaseConv reads `use_act` before setting it (its constructor raises), so no activation
is offered. Parameters use Haiku's initialisers, not PyTorch's.

State per sequence and layer: short_conv and base_conv with a short kernel keep the last k − 1
inputs, (k − 1)·D floats; the long convolution keeps every input, T·D.

Glossary: B batch, T tokens, D width, k kernel size, o filter MLP width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import haiku as hk
import jax.numpy as jnp
import numpy as np

from src.models.mixers.kit import register_mixer

FFT_FROM = 512  # a long convolution over this many tokens or more runs through an FFT
FAST_DECAY, SLOW_DECAY, TARGET = 0.3, 1.5, 1e-2  # the filter's exponential modulation (Zoology's)


def causal_depthwise_conv(x, weights, bias):
    """x [B, T, D], weights [k, D] (weights[k − 1] multiplies x_t, weights[0] x_{t−k+1}),
    bias [D] -> [B, T, D]."""
    k = weights.shape[0]
    padded = jnp.pad(x, ((0, 0), (k - 1, 0), (0, 0)))
    t = x.shape[1]
    return bias + sum(weights[i] * padded[:, i : i + t] for i in range(k))


def causal_long_conv(x, filt):
    """x [B, T, D], filt [T, D] -> y_t = Σ_{s≤t} filt_{t−s} ⊙ x_s, [B, T, D]: an FFT of size 2T
    from FFT_FROM tokens on, else one product with the [T, T, D] Toeplitz filter."""
    t = x.shape[1]
    if t >= FFT_FROM:
        size = 2 * t
        y = jnp.fft.irfft(jnp.fft.rfft(x, n=size, axis=1) * jnp.fft.rfft(filt, n=size, axis=0)[None], n=size, axis=1)
        return y[:, :t].astype(x.dtype)
    lags = np.arange(t)[:, None] - np.arange(t)[None, :]  # t − s
    toeplitz = jnp.where(jnp.asarray(lags >= 0)[..., None], filt[np.clip(lags, 0, None)], 0.0)
    return jnp.einsum("tsd,bsd->btd", toeplitz, x)


def filter_positions(length: int, max_length: int) -> np.ndarray:
    """z [length, 3] = (t, cos ωt', −sin ωt') with t = i / (L − 1), t' = i, ω = 2π·10⁻⁴ / L, for L =
    max_length (Zoology's PositionalEmbedding with emb_dim 3, one band at frequency 10⁻⁴)."""
    i = np.arange(length, dtype=np.float64)
    t = i / max(max_length - 1, 1)
    angle = 1e-4 * 2 * math.pi * i / max_length
    return np.stack([t, np.cos(angle), -np.sin(angle)], axis=-1).astype(np.float32)


def filter_decay(length: int, max_length: int, width: int) -> np.ndarray:
    """exp(−t |δ_d|) [length, D], δ from ln(TARGET)/SLOW_DECAY to ln(TARGET)/FAST_DECAY over the
    channels (Zoology's ExponentialModulation, shift 0)."""
    t = np.arange(length, dtype=np.float64)[:, None] / max(max_length - 1, 1)
    deltas = np.linspace(math.log(TARGET) / SLOW_DECAY, math.log(TARGET) / FAST_DECAY, width)
    return np.exp(-t * np.abs(deltas)[None]).astype(np.float32)


@dataclass(frozen=True)
class ShortConvOptions:
    kernel_size: int = 4  # tokens each output reads: t − k + 1 .. t

    def check(self) -> None:
        if isinstance(self.kernel_size, bool) or not isinstance(self.kernel_size, int) or self.kernel_size < 1:
            raise ValueError(f"kernel_size={self.kernel_size!r}; accepted: an integer >= 1")


@dataclass(frozen=True)
class BaseConvOptions:
    kernel_size: int = 3  # >= 1: a short convolution; -1: the implicit long convolution
    filter_order: int = 16  # width of the long filter's MLP
    max_length: int = 0  # the long filter's time scale; 0: the input's length

    def check(self) -> None:
        for name in ("kernel_size", "filter_order", "max_length"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name}={value!r}; accepted: an integer")
        if self.kernel_size != -1 and self.kernel_size < 1:
            raise ValueError(f"kernel_size={self.kernel_size}; accepted: -1 (long) or an integer >= 1")
        if self.filter_order < 1 or self.max_length < 0:
            raise ValueError(
                f"filter_order={self.filter_order}, max_length={self.max_length}; "
                "accepted: filter_order >= 1 and max_length >= 0"
            )


class ShortConv(hk.Module):
    """The depthwise causal convolution, parameters w [k, D] and (with_bias) b [D] drawn as a
    PyTorch Conv1d's, uniform within ±1/√k."""

    def __init__(self, kernel_size: int, with_bias: bool = True, name=None):
        super().__init__(name=name)
        self.kernel_size, self.with_bias = kernel_size, with_bias

    def __call__(self, x):
        d, k = x.shape[-1], self.kernel_size
        init = hk.initializers.RandomUniform(-1 / math.sqrt(k), 1 / math.sqrt(k))  # Conv1d's fan-in k
        weights = hk.get_parameter("w", [k, d], x.dtype, init)
        bias = hk.get_parameter("b", [d], x.dtype, init) if self.with_bias else 0.0
        return causal_depthwise_conv(x, weights, bias)


class ImplicitLongConv(hk.Module):
    """y_t = Σ_{s≤t} h_{t−s} ⊙ x_s + x_t with h from the filter MLP (module docstring)."""

    def __init__(self, order: int, max_length: int, name=None):
        super().__init__(name=name)
        self.order, self.max_length = order, max_length

    def filter(self, length: int, width: int):
        max_length = self.max_length or length
        if length > max_length:
            raise ValueError(
                f"base_conv's long filter: {length} tokens exceed max_length={max_length}; "
                "accepted: inputs up to max_length (set it to the longest you will evaluate)"
            )
        z = jnp.asarray(filter_positions(length, max_length))
        frequency = hk.get_parameter("frequency", [self.order], z.dtype, hk.initializers.Constant(1.0))
        h = jnp.sin(frequency * hk.Linear(self.order, name="filter_in")(z))
        for i in range(2):
            h = jnp.sin(frequency * hk.Linear(self.order, name=f"filter_{i}")(h))
        h = hk.Linear(width, with_bias=False, name="filter_out")(h)
        return h * jnp.asarray(filter_decay(length, max_length, width))

    def __call__(self, x):
        return causal_long_conv(x, self.filter(x.shape[1], x.shape[2])) + x


class BaseConv(hk.Module):
    def __init__(self, options: BaseConvOptions, name=None):
        super().__init__(name=name)
        self.options = options

    def __call__(self, x):
        o = self.options
        conv = (
            ImplicitLongConv(o.filter_order, o.max_length, name="long_conv")
            if o.kernel_size == -1
            else ShortConv(o.kernel_size, name="short_conv")
        )
        return conv(x) * hk.Linear(x.shape[-1], name="projection")(x) + x


register_mixer(
    "short_conv",
    ShortConvOptions,
    "Zoology: depthwise causal convolution over the last kernel_size tokens, with a bias",
    lambda o, h, n, p: ShortConv(o.kernel_size, name=n),
    state=lambda o, d, h, t: (o.kernel_size - 1) * d,
    state_doc="(kernel_size − 1)·D",
)
register_mixer(
    "base_conv",
    BaseConvOptions,
    "Zoology: BaseConv, conv(x) * (x W + c) + x; kernel_size -1 for Hyena's implicit long filter",
    lambda o, h, n, p: BaseConv(o, name=n),
    state=lambda o, d, h, t: (t if o.kernel_size == -1 else o.kernel_size - 1) * d,
    state_doc="(kernel_size − 1)·D; T·D for the long filter",
)
