"""The ICL benchmark's recurrent sequence mixers (registry "seq_mixer"): `linear_attention` and
`gated_linear_attn`. Both linear ones are one recurrence over a matrix state per head:

    S_t = diag(α_t) S_{t−1} + φ(k_t)ᵀ v_t        y_t = φ(q_t) S_t        (S: [K', K])

  (the ICL benchmark's `attention` is `softmax_causal` of src/models/mixers/attention.py: the recipe's
  command line maps the name)
  linear_attention   α_t = 1, a feature map φ (`feature_map`: identity, elu1 = elu + 1, relu,
                     hadamard = (W₁u) ⊙ (W₂u), hedgehog = softmax([Wu, −Wu])), no normaliser;
                     the output gets an RMSNorm per head (`output_norm: rms`, the default) or
                     none (`output_norm: none`). With feature_map=identity and output_norm=none it
                     is von Oswald et al.'s linear self-attention in causal form, y_t = Σ_{s<=t}
                     (q_t · k_s) v_s: the same map as mechanisms' `linear` (scale: sum)
  gated_linear_attn  GLA (Yang et al. 2023): φ = identity, q scaled by K^−½, a data-dependent
                     decay log α_t = logsigmoid(x W_a W_b) / `gate_temperature` (rank
                     `gate_rank`), output RMSNorm per head times swish(x W_g)

Two forms of the same recurrence, both jittable: `chunked_decay_attention` (chunks of C
positions: inside a chunk a masked product with pairwise decays exp(b_t − b_s) ≤ 1, batched
over the chunks; across chunks the state carried by lax.scan) is what the mixers use;
`recurrent_decay_attention` (one step per position) is the reference the tests compare it with
(≤ 1e-5).

Glossary: B batch, T tokens, D width, H heads, K head size, K' feature size, C chunk.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import haiku as hk
import jax
import jax.numpy as jnp

from src.models.mixers.kit import check_chunk, project_out, project_qkv, register_mixer
from src.settings import added_field

EPS = 1e-6
CHUNK = 16


def recurrent_decay_attention(q, k, v, log_alpha):
    """q, k [B, T, H, K'], v [B, T, H, K], log_alpha [B, T, H, K'] (≤ 0) -> y [B, T, H, K],
    one position at a time."""

    def step(state, inputs):
        q_t, k_t, v_t, a_t = inputs  # [B, H, .]
        state = jnp.exp(a_t)[..., None] * state + k_t[..., :, None] * v_t[..., None, :]
        return state, jnp.einsum("bhf,bhfk->bhk", q_t, state)

    b, _, h, f = q.shape
    state = jnp.zeros((b, h, f, v.shape[-1]), q.dtype)
    _, ys = jax.lax.scan(step, state, tuple(jnp.moveaxis(a, 1, 0) for a in (q, k, v, log_alpha)))
    return jnp.moveaxis(ys, 0, 1)


def chunked_decay_attention(q, k, v, log_alpha=None, chunk: int = CHUNK):
    """The same map as `recurrent_decay_attention`, a chunk of C positions at a time (T is
    padded to a multiple of C; the padding comes after every real position, so it changes
    nothing before it). log_alpha=None means α_t = 1 (linear attention): the same map without
    the decays.

    Every chunk's own work runs at once, batched over the N = T/C chunks: the masked scores
    inside it (with pairwise decays exp(b_t − b_s) ≤ 1, b the cumulative log decay within the
    chunk) and the state it adds, Σ_s exp(b_C − b_s) φ(k_s)ᵀ v_s. Only the carried state
    S_n = exp(b_C) ⊙ S_{n−1} + (chunk n's state) is a lax.scan over chunks (a cumulative sum
    without decays); each position then reads its chunk's incoming state, exp(b_t) φ(q_t) S.
    Every exponent is ≤ 0, so nothing overflows."""
    b, t, h, f = q.shape
    pad = (-t) % chunk
    decays = log_alpha is not None
    inputs = (q, k, v, log_alpha) if decays else (q, k, v)
    if pad:
        inputs = tuple(jnp.pad(a, ((0, 0), (0, pad), (0, 0), (0, 0))) for a in inputs)
    n = (t + pad) // chunk
    q_c, k_c, v_c, *a_c = (a.reshape(b, n, chunk, h, a.shape[-1]) for a in inputs)  # [B, N, C, H, .]
    causal = jnp.tril(jnp.ones((chunk, chunk), bool))
    if decays:
        cum = jnp.cumsum(a_c[0], axis=2)  # b_t within its chunk
        gap = cum[:, :, :, None] - cum[:, :, None, :]  # [B, N, C(t), C(s), H, K']
        decay = jnp.exp(jnp.where(causal[:, :, None, None], gap, -jnp.inf))
        scores = jnp.einsum("bnthf,bnshf,bntshf->bnhts", q_c, k_c, decay)
        last = cum[:, :, -1]  # b_C [B, N, H, K']
        added = jnp.einsum("bnshf,bnshk->bnhfk", k_c * jnp.exp(last[:, :, None] - cum), v_c)

        def carry(state, chunk_inputs):  # state [B, H, K', K]
            added_n, last_n = chunk_inputs
            return jnp.exp(last_n)[..., None] * state + added_n, state

        _, incoming = jax.lax.scan(
            carry, jnp.zeros_like(added[:, 0]), (jnp.moveaxis(added, 1, 0), jnp.moveaxis(last, 1, 0))
        )
        incoming = jnp.moveaxis(incoming, 0, 1)  # [B, N, H, K', K]
        q_read = q_c * jnp.exp(cum)
    else:
        scores = jnp.where(causal, jnp.einsum("bnthf,bnshf->bnhts", q_c, k_c), 0.0)
        added = jnp.einsum("bnshf,bnshk->bnhfk", k_c, v_c)
        incoming = jnp.cumsum(added, axis=1) - added  # the chunks before n
        q_read = q_c
    y = jnp.einsum("bnhts,bnshk->bnthk", scores, v_c) + jnp.einsum("bnthf,bnhfk->bnthk", q_read, incoming)
    return y.reshape(b, t + pad, h, -1)[:, :t]


def _head_rms_norm(y, name: str):
    """RMSNorm over each head's K features, one learned scale [K] shared by the heads."""
    return hk.RMSNorm(axis=-1, eps=EPS, name=name)(y)


FEATURE_MAPS = ("identity", "elu1", "relu", "hadamard", "hedgehog")
OUTPUT_NORMS = ("rms", "none")  # linear_attention's output: an RMSNorm per head, or as it is


def feature_map(u, kind: str, name: str):
    """φ(u) for u [B, T, H, K] -> [B, T, H, K'] (K' = 2K for hedgehog, else K)."""
    if kind == "identity":
        return u
    if kind == "elu1":
        return jax.nn.elu(u) + 1.0
    if kind == "relu":
        return jax.nn.relu(u)
    size = u.shape[-1]
    if kind == "hadamard":
        first = hk.Linear(size, name=f"{name}_hadamard_a")(u)
        return first * hk.Linear(size, name=f"{name}_hadamard_b")(u)
    projected = hk.Linear(size, name=f"{name}_hedgehog")(u)
    return jax.nn.softmax(jnp.concatenate([projected, -projected], -1), axis=-1)


@dataclass(frozen=True)
class LinearAttentionOptions:
    feature_map: str = "hadamard"  # identity | elu1 | relu | hadamard | hedgehog
    output_norm: str = added_field("rms")  # rms (an RMSNorm per head) | none (LSA's raw sum)

    def check(self) -> None:
        if self.feature_map not in FEATURE_MAPS:
            raise ValueError(f"feature_map={self.feature_map!r} is unknown; accepted: {', '.join(FEATURE_MAPS)}")
        if self.output_norm not in OUTPUT_NORMS:
            raise ValueError(f"output_norm={self.output_norm!r} is unknown; accepted: {', '.join(OUTPUT_NORMS)}")


@dataclass(frozen=True)
class GLAOptions:
    gate_rank: int = 16  # rank of the decay's projection D -> r -> K per head
    gate_temperature: float = 16.0  # log α = logsigmoid(·) / temperature
    chunk: int = CHUNK  # positions per chunk of the chunked form (changes float rounding only)

    def check(self) -> None:
        check_chunk(self.chunk)
        if self.gate_rank < 1 or not self.gate_temperature > 0:
            raise ValueError(
                f"gate_rank={self.gate_rank}, gate_temperature={self.gate_temperature}; "
                "accepted: gate_rank >= 1 and gate_temperature > 0"
            )


class LinearAttentionMixer(hk.Module):
    def __init__(self, num_heads: int, kind: str, output_norm: str = "rms", name=None):
        super().__init__(name=name)
        self.num_heads, self.kind, self.output_norm = num_heads, kind, output_norm

    def __call__(self, x):
        q, k, v = project_qkv(x, self.num_heads)
        phi_q, phi_k = feature_map(q, self.kind, "q"), feature_map(k, self.kind, "k")
        y = chunked_decay_attention(phi_q, phi_k, v)  # α_t = 1
        if self.output_norm == "rms":
            y = _head_rms_norm(y, "norm")
        return project_out(y, x.shape[-1])


class GatedLinearAttention(hk.Module):
    def __init__(self, num_heads: int, rank: int, temperature: float, chunk: int = CHUNK, name=None):
        super().__init__(name=name)
        self.num_heads, self.rank, self.temperature, self.chunk = num_heads, rank, temperature, chunk

    def __call__(self, x):
        b, t, d = x.shape
        q, k, v = project_qkv(x, self.num_heads)
        size = d // self.num_heads
        low = hk.Linear(self.rank, with_bias=False, name="gate_a")(x)
        log_alpha = jax.nn.log_sigmoid(hk.Linear(d, name="gate_b")(low)) / self.temperature
        y = chunked_decay_attention(
            q / math.sqrt(size), k, v, log_alpha.reshape(b, t, self.num_heads, size), chunk=self.chunk
        )
        gate = jax.nn.swish(hk.Linear(d, with_bias=False, name="out_gate")(x)).reshape(y.shape)
        return project_out(_head_rms_norm(y, "norm") * gate, d)


register_mixer(
    "linear_attention",
    LinearAttentionOptions,
    "ICL benchmark: causal linear attention with a feature map, per-head RMSNorm output "
    "(output_norm: none leaves it out)",
    lambda o, h, n, p: LinearAttentionMixer(h, o.feature_map, o.output_norm, name=n),
    state=lambda o, d, h, t: h * (2 if o.feature_map == "hedgehog" else 1) * (d // h) ** 2,
    state_doc="H·K'·K (K' = 2K for hedgehog, else K)",
)
register_mixer(
    "gated_linear_attn",
    GLAOptions,
    "ICL benchmark: GLA, data-dependent low-rank decay, RMSNorm x swish-gate output",
    lambda o, h, n, p: GatedLinearAttention(h, o.gate_rank, o.gate_temperature, o.chunk, name=n),
    state=lambda o, d, h, t: h * (d // h) ** 2,
    state_doc="H·K²",
)
