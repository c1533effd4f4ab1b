"""DeltaNet (Schlag et al. 2021; Yang et al. 2024, "Parallelizing Linear Transformers with the
Delta Rule over Sequence Length") and Gated DeltaNet (Yang, Kautz & Hatamizadeh 2025), as Zoology
runs them (`zoology/mixers/delta_net.py`, `gated_delta_net.py` over the flash-linear-attention
kernels), registry "seq_mixer" `delta_net` and `gated_delta_net`.

Per head, a matrix state S [K, K] that the delta rule corrects toward each new value:

    u_t = β_t (v_t − Sᵀ_{t−1} k_t)      S_t = S_{t−1} + k_t u_tᵀ      y_t = Sᵀ_t q_t / √K

with q, k, v = SiLU(causal depthwise conv over `conv_size` tokens (no bias) of x W_q, x W_k, x W_v),
q and k L2-normalised per head, β_t = sigmoid(x W_β) per head (1 with `use_beta: false`), then an
RMSNorm per head and the output projection. Zoology's defaults: conv_size 4, use_beta, SiLU, L2.

Two forms of one map, both jittable: `chunked_delta_rule` (chunks of C positions; inside a chunk
the corrections solve one unit lower-triangular system, U = (I + tril(diag β K Kᵀ, −1))⁻¹ diag β
(V − K S), so the chunk's outputs Q S + tril(Q Kᵀ) U and its new state S + Kᵀ U are products;
the state is carried across chunks by lax.scan) is what the mixer trains with;
`recurrent_delta_rule` (one position at a time) is the reference it is tested against.

Gated DeltaNet decays the state by α_t ∈ (0, 1) per head before each correction,

    S'_{t} = α_t S_{t−1}    u_t = β_t (v_t − S'ᵀ k_t)    S_t = S' + k_t u_tᵀ    y_t = Sᵀ_t q_t / √K

with α_t = exp(−exp(A_log) · softplus(x W_α + dt_bias)) (A_log = log U(0, 16), dt_bias the inverse
softplus of dt ~ logUniform(0.001, 0.1) floored at 1e-4), values of size `expand_v` · K, and an
RMSNorm over each head's values, SiLU-gated by x W_g with `use_gate`. In a chunk, with Γ_c the
product of α from the chunk's start to c, the corrections scaled by Γ solve
(I + tril(diag β (K Kᵀ ⊙ Γ_c/Γ_s), −1)) Ū = diag β (V − diag Γ K S), and every factor is a ratio
Γ_c/Γ_s ≤ 1 taken as exp of a difference of log-sums (no overflow); α = 1 is DeltaNet's chunk.
Zoology's defaults for MQAR (its models_repo): conv_size 4, expand_v 2, no gate.

State per sequence and layer: H·K·K floats for DeltaNet, H·K·(expand_v·K) for Gated DeltaNet
(plus the convolutions' (conv_size − 1) inputs of q, k and v).

Glossary: B batch, T tokens, D width, H heads, K head size (D / H), V value size, C chunk.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import haiku as hk
import jax
import jax.numpy as jnp

from src.models.mixers.kit import check_chunk, project_out, register_mixer, OptionsMixer
from src.models.mixers.convolutions import ShortConv
from src.models.mixers.mamba import dt_bias_init

CHUNK = 16
NORM_EPS = 1e-5  # the output RMSNorm's (Zoology's norm_eps)
L2_EPS = 1e-6  # q / sqrt(Σq² + eps), flash-linear-attention's l2norm


def unit_lower_solve(system, rhs):
    """system⁻¹ rhs for unit lower-triangular systems [..., C, C], rhs [..., C, M], by matrix
    products alone: with L = system − I (strictly lower, so L^C = 0), system⁻¹ =
    (I − L)(I + L²)(I + L⁴)…(I + L^(2^m)), 2^(m+1) ≥ C. (jax.scipy.linalg.solve_triangular inside
    the training loop's scans hung XLA's CPU runtime, measured 2026-11-27: a chunk of 2 steps of
    DeltaNet at width 64 blocked for minutes with idle cores.)"""
    c = system.shape[-1]
    power = system - jnp.eye(c, dtype=system.dtype)
    x = rhs - power @ rhs
    span = 1
    while 2 * span < c:
        power, span = power @ power, 2 * span  # L^span
        x = x + power @ x
    return x


def recurrent_delta_rule(q, k, v, beta, log_alpha=None):
    """q, k [B, T, H, K], v [B, T, H, V], beta [B, T, H], log_alpha [B, T, H] or None (no decay)
    -> y [B, T, H, V] (q already scaled), one position at a time."""
    if log_alpha is None:
        log_alpha = jnp.zeros_like(beta)

    def step(state, inputs):  # state [B, H, K, V]
        q_t, k_t, v_t, b_t, g_t = inputs
        state = jnp.exp(g_t)[..., None, None] * state
        u_t = b_t[..., None] * (v_t - jnp.einsum("bhkv,bhk->bhv", state, k_t))
        state = state + k_t[..., :, None] * u_t[..., None, :]
        return state, jnp.einsum("bhkv,bhk->bhv", state, q_t)

    b, _, h, size = q.shape
    state = jnp.zeros((b, h, size, v.shape[-1]), q.dtype)
    _, ys = jax.lax.scan(step, state, tuple(jnp.moveaxis(a, 1, 0) for a in (q, k, v, beta, log_alpha)))
    return jnp.moveaxis(ys, 0, 1)


def chunked_delta_rule(q, k, v, beta, log_alpha=None, chunk: int = CHUNK):
    """The map of `recurrent_delta_rule`, C positions at a time. T is padded to a multiple of C
    with β = 0, k = 0 and no decay after every real position, which changes nothing before it.
    Without log_alpha the products are DeltaNet's, bit for bit as before the gate existed."""
    b, t, h, size = q.shape
    pad = (-t) % chunk
    if pad:
        q, k, v = (jnp.pad(a, ((0, 0), (0, pad), (0, 0), (0, 0))) for a in (q, k, v))
        beta = jnp.pad(beta, ((0, 0), (0, pad), (0, 0)))
        log_alpha = None if log_alpha is None else jnp.pad(log_alpha, ((0, 0), (0, pad), (0, 0)))
    n = (t + pad) // chunk
    q_c, k_c, v_c = (jnp.moveaxis(a.reshape(b, n, chunk, h, -1), 3, 2) for a in (q, k, v))  # [B, N, H, C, K]
    beta_c = jnp.moveaxis(beta.reshape(b, n, chunk, h), 3, 2)[..., None]  # [B, N, H, C, 1]
    lower = jnp.tril(jnp.ones((chunk, chunk), bool))
    strictly_lower = jnp.tril(jnp.ones((chunk, chunk), bool), -1)
    if log_alpha is None:
        decay_to = jnp.ones((1, 1, 1, chunk, 1))  # Γ_c
        ratios = jnp.ones((chunk, chunk))  # Γ_c / Γ_s
        decay_end = jnp.ones((1, 1, 1, chunk, 1))  # Γ_C / Γ_s
        decay_all = jnp.ones((1, 1, 1, 1))  # Γ_C
    else:
        cum = jnp.cumsum(jnp.moveaxis(log_alpha.reshape(b, n, chunk, h), 3, 2), axis=-1)  # [B, N, H, C]
        decay_to = jnp.exp(cum)[..., None]
        ratios = jnp.exp(jnp.where(lower, cum[..., :, None] - cum[..., None, :], -jnp.inf))
        decay_end = jnp.exp(cum[..., -1:] - cum)[..., None]
        decay_all = jnp.exp(cum[..., -1])[..., None, None]
    system = jnp.eye(chunk) + jnp.where(
        strictly_lower, beta_c * jnp.einsum("...ck,...sk->...cs", k_c, k_c) * ratios, 0.0
    )
    solved = unit_lower_solve(system, jnp.concatenate([beta_c * decay_to * k_c, beta_c * v_c], -1))
    w_c, u_c = solved[..., :size], solved[..., size:]  # Ū = u_c − w_c S
    scores = jnp.where(lower, jnp.einsum("...ck,...sk->...cs", q_c, k_c) * ratios, 0.0)
    gated = log_alpha is not None

    def per_chunk(state, inputs):  # state [B, H, K, V]
        q_n, k_n, w_n, u_n, scores_n, to_n, end_n, all_n = inputs
        corrections = u_n - jnp.einsum("bhck,bhkv->bhcv", w_n, state)
        if gated:
            y_n = jnp.einsum("bhck,bhkv->bhcv", to_n * q_n, state) + jnp.einsum(
                "bhcs,bhsv->bhcv", scores_n, corrections
            )
            return all_n * state + jnp.einsum("bhck,bhcv->bhkv", end_n * k_n, corrections), y_n
        y_n = jnp.einsum("bhck,bhkv->bhcv", q_n, state) + jnp.einsum("bhcs,bhsv->bhcv", scores_n, corrections)
        return state + jnp.einsum("bhck,bhcv->bhkv", k_n, corrections), y_n

    per_n = lambda a: jnp.moveaxis(jnp.broadcast_to(a, (b, n) + a.shape[2:]), 1, 0)  # noqa: E731
    state = jnp.zeros((b, h, size, v.shape[-1]), q.dtype)
    _, ys = jax.lax.scan(
        per_chunk,
        state,
        (
            *(jnp.moveaxis(a, 1, 0) for a in (q_c, k_c, w_c, u_c, scores)),
            per_n(decay_to),
            per_n(decay_end),
            per_n(decay_all),
        ),
    )
    ys = jnp.moveaxis(ys, 0, 1)  # [B, N, H, C, V]
    return jnp.moveaxis(ys, 2, 3).reshape(b, n * chunk, h, -1)[:, :t]


@dataclass(frozen=True)
class DeltaNetOptions:
    conv_size: int = 4  # the short convolutions over q, k and v (tokens)
    use_beta: bool = True  # β_t = sigmoid(x W_β); false: β = 1
    chunk: int = CHUNK  # positions per chunk of the chunked form (changes float rounding only)

    def check(self) -> None:
        check_chunk(self.chunk)
        if isinstance(self.conv_size, bool) or not isinstance(self.conv_size, int) or self.conv_size < 1:
            raise ValueError(f"conv_size={self.conv_size!r}; accepted: an integer >= 1")
        if not isinstance(self.use_beta, bool):
            raise ValueError(f"use_beta={self.use_beta!r}; accepted: true or false")


class DeltaNet(OptionsMixer):
    def _branch(self, x, name: str):
        """SiLU(causal conv (no bias) of x W), [B, T, D]."""
        projected = hk.Linear(x.shape[-1], with_bias=False, name=f"{name}_proj")(x)
        return jax.nn.silu(ShortConv(self.options.conv_size, with_bias=False, name=f"{name}_conv")(projected))

    def __call__(self, x):
        b, t, d = x.shape
        h = self.num_heads
        size = d // h
        q, k, v = (self._branch(x, name).reshape(b, t, h, size) for name in ("q", "k", "v"))
        q, k = (a / jnp.sqrt(jnp.sum(a * a, -1, keepdims=True) + L2_EPS) for a in (q, k))
        beta = (
            jax.nn.sigmoid(hk.Linear(h, with_bias=False, name="beta")(x))
            if self.options.use_beta
            else jnp.ones((b, t, h), x.dtype)
        )
        y = chunked_delta_rule(q / math.sqrt(size), k, v, beta, chunk=self.options.chunk)
        y = hk.RMSNorm(axis=-1, eps=NORM_EPS, name="norm")(y)
        return project_out(y, d)


register_mixer(
    "delta_net",
    DeltaNetOptions,
    "Zoology: DeltaNet, the delta rule over a matrix state per head (chunked), short convs on q, k, v",
    lambda o, h, n, p: DeltaNet(h, o, name=n),
    state=lambda o, d, h, t: h * (d // h) ** 2 + 3 * (o.conv_size - 1) * d,
    state_doc="H·K² + 3·(conv_size − 1)·D",
)


@dataclass(frozen=True)
class GatedDeltaNetOptions:
    conv_size: int = 4  # the short convolutions over q, k and v (tokens)
    expand_v: int = 2  # value size per head over key size (Zoology's expand_v)
    use_gate: bool = False  # the output RMSNorm SiLU-gated by x W_g (Zoology's MQAR configs: off)
    chunk: int = CHUNK  # positions per chunk of the chunked form (changes float rounding only)

    def check(self) -> None:
        check_chunk(self.chunk)
        for name in ("conv_size", "expand_v"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r}; accepted: an integer >= 1")
        if not isinstance(self.use_gate, bool):
            raise ValueError(f"use_gate={self.use_gate!r}; accepted: true or false")


class GatedDeltaNet(OptionsMixer):
    def _branch(self, x, width: int, name: str):
        projected = hk.Linear(width, with_bias=False, name=f"{name}_proj")(x)
        return jax.nn.silu(ShortConv(self.options.conv_size, with_bias=False, name=f"{name}_conv")(projected))

    def __call__(self, x):
        b, t, d = x.shape
        h, o = self.num_heads, self.options
        size = d // h
        values = o.expand_v * size
        q, k = (self._branch(x, d, name).reshape(b, t, h, size) for name in ("q", "k"))
        v = self._branch(x, h * values, "v").reshape(b, t, h, values)
        q, k = (a / jnp.sqrt(jnp.sum(a * a, -1, keepdims=True) + L2_EPS) for a in (q, k))
        beta = jax.nn.sigmoid(hk.Linear(h, with_bias=False, name="beta")(x))
        a_log = hk.get_parameter(
            "A_log",
            [h],
            x.dtype,
            lambda shape, dtype: jnp.log(jax.random.uniform(hk.next_rng_key(), shape, dtype, 0.0, 16.0)),
        )
        dt_bias = hk.get_parameter("dt_bias", [h], x.dtype, dt_bias_init)
        log_alpha = -jnp.exp(a_log) * jax.nn.softplus(hk.Linear(h, with_bias=False, name="alpha")(x) + dt_bias)
        y = chunked_delta_rule(q / math.sqrt(size), k, v, beta, log_alpha, chunk=o.chunk)
        scale = hk.get_parameter("norm_scale", [values], x.dtype, jnp.ones)  # one weight shared by the heads
        y = y / jnp.sqrt(jnp.mean(y * y, -1, keepdims=True) + NORM_EPS) * scale
        if o.use_gate:
            y = y * jax.nn.silu(hk.Linear(h * values, with_bias=False, name="gate")(x).reshape(b, t, h, values))
        return project_out(y, d)


register_mixer(
    "gated_delta_net",
    GatedDeltaNetOptions,
    "Zoology: Gated DeltaNet, the delta rule with a decay per head (chunked), values expand_v x K",
    lambda o, h, n, p: GatedDeltaNet(h, o, name=n),
    state=lambda o, d, h, t: h * (d // h) * (o.expand_v * d // h) + (o.conv_size - 1) * (2 + o.expand_v) * d,
    state_doc="H·K·(expand_v·K) + (conv_size − 1)·(2 + expand_v)·D",
)
