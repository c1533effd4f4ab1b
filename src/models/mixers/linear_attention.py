"""Linear attention with kernel feature maps, as registered sequence mixers (registry
"seq_mixer"): limits_of_icl's kernelised mechanisms and plain causal linear attention.

Every mixer maps x [B, T, D] -> [B, T, D] through per-head q, k, v [B, T, H, K] and a causal sum
y_t = Σ_{s<=t} (φ(q_t) · φ(k_s)) v_s, normalised by Σ_{s<=t} φ(q_t) · φ(k_s) or not.

  favor           FAVOR+ (Choromanski et al. 2021): positive orthogonal random features
                  φ(u) = exp(ωᵀu − ‖u‖²/2)/√m of u = q/K^¼ (and k), causal prefix sums
                  y_t = φ(q_t)ᵀ S_t / (φ(q_t)ᵀ z_t + ε); the features are drawn once, from a
                  fixed key per layer, and never redrawn (the redraw policy)
  rebased         ReBased (Aksenov et al. 2024): φ(u) = (γ ⊙ LN(u) + β)² per head, normalised
                  causal prefix sums
  linear          y_t = Σ_{s<=t} (q_t · k_s) v_s, no normalisation (`scale: sum`, the default), or
                  that sum over the t visible tokens' count (`scale: mean`): von Oswald et al.'s
                  linear self-attention, whose sum over the context is one GD step only when
                  divided by the number of examples

Glossary: B batch, T tokens, D width, H heads, K head size, m random features.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import haiku as hk
import jax
import jax.numpy as jnp

from src.models.mixers.kit import EPS, HeadsMixer, causal_mask, project_out, project_qkv, register_mixer
from src.registry import NoOptions
from src.settings import require_int


@dataclass(frozen=True)
class LinearOptions:
    scale: str = "sum"  # sum: Σ_{s<=t} (q_t · k_s) v_s; mean: the same divided by t (visible tokens)

    def check(self) -> None:
        if self.scale not in LINEAR_SCALES:
            raise ValueError(f"scale={self.scale!r} is not accepted; accepted: {', '.join(LINEAR_SCALES)}")


LINEAR_SCALES = ("sum", "mean")


@dataclass(frozen=True)
class FavorOptions:
    num_features: int = 64  # m positive random features per head

    def check(self) -> None:
        require_int("num_features", self.num_features, 1, 65_536)


def positive_random_features(u: jax.Array, omega: jax.Array) -> jax.Array:
    """φ(u) = exp(ωᵀu − ‖u‖²/2)/√m: u [..., K], ω [K, m] -> [..., m]."""
    m = omega.shape[-1]
    return jnp.exp(u @ omega - 0.5 * jnp.sum(u**2, axis=-1, keepdims=True)) / math.sqrt(m)


def orthogonal_gaussian(key: jax.Array, size: int, count: int) -> jax.Array:
    """[size, count] columns: blocks of orthogonal directions with chi-distributed norms."""
    blocks = []
    for i in range(math.ceil(count / size)):
        g = jax.random.normal(jax.random.fold_in(key, i), (size, size))
        q, r = jnp.linalg.qr(g)
        blocks.append(q * jnp.sign(jnp.diagonal(r)))  # sign fix: Haar-distributed directions
    directions = jnp.concatenate(blocks, axis=1)[:, :count]
    norms = jnp.linalg.norm(jax.random.normal(jax.random.fold_in(key, 10_000), (size, count)), axis=0)
    return directions * norms


def kernel_prefix_attention(phi_q, phi_k, v, normalise: bool = True):
    """Causal Σ_{s<=t} (φ_q,t · φ_k,s) v_s (/ Σ_{s<=t} φ_q,t · φ_k,s) with prefix sums of the
    state S_t = Σ_{s<=t} φ_k,s v_sᵀ: phi_q, phi_k [B, T, H, m], v [B, T, H, K] -> [B, T, H, K].
    The recurrent definition (memory O(T m K)); `kernel_attention` is the same sum."""
    state = jnp.cumsum(jnp.einsum("bthm,bthk->bthmk", phi_k, v), axis=1)  # S_t
    y = jnp.einsum("bthm,bthmk->bthk", phi_q, state)
    if not normalise:
        return y
    z = jnp.cumsum(phi_k, axis=1)  # z_t
    return y / (jnp.einsum("bthm,bthm->bth", phi_q, z)[..., None] + EPS)


def kernel_attention(phi_q, phi_k, v, normalise: bool = True):
    """The same causal sum as kernel_prefix_attention, as a masked [T, T] product: identical
    mathematics, much faster for the short sequences of in-context regression (T <= ~100)."""
    weights = jnp.einsum("bthm,bshm->bhts", phi_q, phi_k)
    weights = jnp.where(causal_mask(phi_q.shape[1]), weights, 0.0)
    y = jnp.einsum("bhts,bshk->bthk", weights, v)
    if not normalise:
        return y
    return y / (jnp.sum(weights, axis=-1).transpose(0, 2, 1)[..., None] + EPS)


class Favor(HeadsMixer):
    def __init__(self, num_heads, num_features: int, name=None):
        super().__init__(num_heads, name)
        self.num_features = num_features

    def __call__(self, x):
        q, k, v = project_qkv(x, self.num_heads)
        size = q.shape[-1]
        omega = hk.get_state(
            "omega",
            (size, self.num_features),
            init=lambda shape, dtype: orthogonal_gaussian(jax.random.key(17), size, self.num_features),
        )
        scale = size**-0.25
        y = kernel_attention(positive_random_features(q * scale, omega), positive_random_features(k * scale, omega), v)
        return project_out(y, x.shape[-1])


class ReBased(HeadsMixer):
    def __call__(self, x):
        q, k, v = project_qkv(x, self.num_heads)
        size = q.shape[-1]
        gamma = hk.get_parameter("gamma", (size,), init=jnp.ones)
        beta = hk.get_parameter("beta", (size,), init=jnp.zeros)

        def phi(u):
            centred = u - u.mean(-1, keepdims=True)
            normed = centred / jnp.sqrt((centred**2).mean(-1, keepdims=True) + 1e-5)
            return (gamma * normed + beta) ** 2

        return project_out(kernel_attention(phi(q), phi(k), v), x.shape[-1])


class LinearAttention(HeadsMixer):
    def __init__(self, num_heads, scale: str = "sum", name=None):
        super().__init__(num_heads, name)
        self.scale = scale

    def __call__(self, x):
        q, k, v = project_qkv(x, self.num_heads)
        y = kernel_attention(q, k, v, normalise=False)  # [B, T, H, K]
        if self.scale == "mean":
            y = y / jnp.arange(1, x.shape[1] + 1, dtype=y.dtype)[None, :, None, None]
        return project_out(y, x.shape[-1])


register_mixer(
    "favor",
    FavorOptions,
    "FAVOR+ positive orthogonal random features, causal prefix sums",
    lambda o, h, n, p: Favor(h, o.num_features, name=n),
    state=lambda o, d, h, t: h * o.num_features * (d // h + 1),
    state_doc="H·m·(K + 1) (sums and normaliser)",
)
register_mixer(
    "rebased",
    NoOptions,
    "ReBased: (gamma LN(u) + beta)^2 features, normalised prefix sums",
    lambda o, h, n, p: ReBased(h, name=n),
    state=lambda o, d, h, t: h * (d // h) * (d // h + 1),
    state_doc="H·K·(K + 1) (sums and normaliser)",
)
register_mixer(
    "linear",
    LinearOptions,
    "plain causal linear attention, no normalisation (scale: sum) or divided by the visible tokens (scale: mean)",
    lambda o, h, n, p: LinearAttention(h, o.scale, name=n),
    state=lambda o, d, h, t: h * (d // h) ** 2,
    state_doc="H·K²",
)
