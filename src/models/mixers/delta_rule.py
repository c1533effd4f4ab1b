"""DeltaNet (Schlag et al. 2021; Yang et al. 2024, "Parallelizing Linear Transformers with the
Delta Rule over Sequence Length"), as Zoology runs it (`zoology/mixers/delta_net.py` over the
flash-linear-attention kernels), registry "seq_mixer" `delta_net`.

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

State per sequence and layer: H·K·K floats (plus the convolutions' 3·(conv_size − 1)·D inputs).

Glossary: B batch, T tokens, D width, H heads, K head size (D / H), C chunk.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import haiku as hk
import jax
import jax.numpy as jnp

from src.models.mechanisms import project_out, register_mixer
from src.models.mixers.convolutions import ShortConv

CHUNK = 16
NORM_EPS = 1e-5                 # the output RMSNorm's (Zoology's norm_eps)
L2_EPS = 1e-6                   # q / sqrt(Σq² + eps), flash-linear-attention's l2norm


def recurrent_delta_rule(q, k, v, beta):
    """q, k, v [B, T, H, K], beta [B, T, H] -> y [B, T, H, K] (q already scaled), one position at
    a time."""
    def step(state, inputs):                                                 # state [B, H, K, K]
        q_t, k_t, v_t, b_t = inputs
        u_t = b_t[..., None] * (v_t - jnp.einsum("bhkv,bhk->bhv", state, k_t))
        state = state + k_t[..., :, None] * u_t[..., None, :]
        return state, jnp.einsum("bhkv,bhk->bhv", state, q_t)
    b, _, h, size = q.shape
    state = jnp.zeros((b, h, size, v.shape[-1]), q.dtype)
    _, ys = jax.lax.scan(step, state, tuple(jnp.moveaxis(a, 1, 0) for a in (q, k, v, beta)))
    return jnp.moveaxis(ys, 0, 1)


def chunked_delta_rule(q, k, v, beta, chunk: int = CHUNK):
    """The map of `recurrent_delta_rule`, C positions at a time. T is padded to a multiple of C
    with β = 0 and k = 0 after every real position, which changes nothing before it."""
    b, t, h, size = q.shape
    pad = (-t) % chunk
    if pad:
        q, k, v = (jnp.pad(a, ((0, 0), (0, pad), (0, 0), (0, 0))) for a in (q, k, v))
        beta = jnp.pad(beta, ((0, 0), (0, pad), (0, 0)))
    n = (t + pad) // chunk
    q_c, k_c, v_c = (jnp.moveaxis(a.reshape(b, n, chunk, h, -1), 3, 2) for a in (q, k, v))   # [B, N, H, C, K]
    beta_c = jnp.moveaxis(beta.reshape(b, n, chunk, h), 3, 2)[..., None]                  # [B, N, H, C, 1]
    strictly_lower = jnp.tril(jnp.ones((chunk, chunk), bool), -1)
    system = jnp.eye(chunk) + jnp.where(strictly_lower, beta_c * jnp.einsum("...ck,...sk->...cs", k_c, k_c), 0.0)
    solved = jax.scipy.linalg.solve_triangular(system, jnp.concatenate([beta_c * k_c, beta_c * v_c], -1),
                                               lower=True, unit_diagonal=True)
    w_c, u_c = solved[..., :size], solved[..., size:]                      # U = u_c − w_c S
    scores = jnp.where(jnp.tril(jnp.ones((chunk, chunk), bool)), jnp.einsum("...ck,...sk->...cs", q_c, k_c), 0.0)

    def per_chunk(state, inputs):                                            # state [B, H, K, K]
        q_n, k_n, w_n, u_n, scores_n = inputs
        corrections = u_n - jnp.einsum("bhck,bhkv->bhcv", w_n, state)
        y_n = jnp.einsum("bhck,bhkv->bhcv", q_n, state) + jnp.einsum("bhcs,bhsv->bhcv", scores_n, corrections)
        return state + jnp.einsum("bhck,bhcv->bhkv", k_n, corrections), y_n
    state = jnp.zeros((b, h, size, v.shape[-1]), q.dtype)
    _, ys = jax.lax.scan(per_chunk, state, tuple(jnp.moveaxis(a, 1, 0) for a in (q_c, k_c, w_c, u_c, scores)))
    ys = jnp.moveaxis(ys, 0, 1)                                              # [B, N, H, C, K]
    return jnp.moveaxis(ys, 2, 3).reshape(b, n * chunk, h, -1)[:, :t]


@dataclass(frozen=True)
class DeltaNetOptions:
    conv_size: int = 4                # the short convolutions over q, k and v (tokens)
    use_beta: bool = True             # β_t = sigmoid(x W_β); false: β = 1

    def check(self) -> None:
        if isinstance(self.conv_size, bool) or not isinstance(self.conv_size, int) or self.conv_size < 1:
            raise ValueError(f"conv_size={self.conv_size!r}; accepted: an integer >= 1")
        if not isinstance(self.use_beta, bool):
            raise ValueError(f"use_beta={self.use_beta!r}; accepted: true or false")


class DeltaNet(hk.Module):
    def __init__(self, num_heads: int, options: DeltaNetOptions, name=None):
        super().__init__(name=name)
        self.num_heads, self.options = num_heads, options

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
        beta = (jax.nn.sigmoid(hk.Linear(h, with_bias=False, name="beta")(x)) if self.options.use_beta
                else jnp.ones((b, t, h), x.dtype))
        y = chunked_delta_rule(q / math.sqrt(size), k, v, beta)
        y = hk.RMSNorm(axis=-1, eps=NORM_EPS, name="norm")(y)
        return project_out(y, d)


register_mixer("delta_net", DeltaNetOptions,
               "Zoology: DeltaNet, the delta rule over a matrix state per head (chunked), short convs on q, k, v",
               lambda o, h, n, p: DeltaNet(h, o, name=n),
               state=lambda o, d, h, t: h * (d // h) ** 2 + 3 * (o.conv_size - 1) * d,
               state_doc="H·K² + 3·(conv_size − 1)·D")
