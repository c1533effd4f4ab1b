"""RWKV-7 "Goose" time mixing (Peng et al. 2025, "RWKV-7 'Goose' with Expressive Dynamic State
Evolution"), as Zoology runs it (`zoology/mixers/rwkv7.py` over flash-linear-attention's
`chunk_rwkv7` = `chunk_dplr_delta_rule`), registry "seq_mixer" `rwkv7`.

Each branch c in (r, w, k, v, a, g) reads its own interpolation of the token and the one before
(token shift; x_{−1} = 0): x_c = x_t + (x_{t−1} − x_t) ⊙ μ_c (μ = the parameter x_x [6, D]). Then

    r = x_r W_r      k = x_k W_k      v = x_v W_v
    w = −e^{−½} σ(LoRA_w(x_w))                 (log decay per channel: exp(w) in (0.545, 1))
    a = σ(LoRA_a(x_a))                          (in-context learning rate per channel)
    g = LoRA_g(x_g)                             (output gate)
    κ̂ = L2-normalised per head (k ⊙ k_k)       (z / √(Σz² + 1e-6), taken from k before the next line)
    k̃ = k ⊙ (1 + (a − 1) ⊙ k_a)

with LoRA(u) = act(u A) B (+ bias): w tanh and a bias, a identity and a bias, g sigmoid without a
bias. Per head a matrix state S [K, K] (key index first), S_0 = 0:

    S_t = diag(exp w_t) S_{t−1} − (κ̂_t ⊙ a_t)(κ̂_tᵀ S_{t−1}) + k̃_t v_tᵀ        o_t = Sᵀ_t r_t

(the removal reads the undecayed S_{t−1}; the output reads the updated state, so the current token
counts; scale 1). That is flash-linear-attention's DPLR recurrence S_t = diag(exp w) S + β (αᵀ S)
+ k vᵀ with α = −κ̂, β = κ̂ ⊙ a. Last, a GroupNorm per head (LayerNorm over the head's K values,
mean subtracted, eps = K · norm_eps, an affine weight [D] = 1 and bias [D] = 0 at init), the
"bonus" of the current token, and the gated output projection:

    o ← GroupNorm(o) + (Σ_{i in head} r_i k̃_i r_k[h, i]) v_head        y = (o ⊙ g) W_o

Two forms of one recurrence, both jittable: `chunked_rwkv7` (chunks of C positions: inside a
chunk the removals u_t = αᵀ_t S_{t−1} solve one unit lower-triangular system, (I − M) U = Ã S +
N V, with M, N the pairwise products of α with β and k̃ under the decays exp(G_{t−1} − G_s) ≤ 1
(G the cumulative log decay within the chunk), so every exponent is ≤ 0 and nothing overflows;
the state is carried across chunks by lax.scan) is what the mixer trains with;
`recurrent_rwkv7` (one position at a time, state [B, H, K, K]) is the reference it is tested
against (≤ 1e-5). Both run in float32 whatever the model's precision. A Haiku init skips the
recurrence (it has no parameters) and returns zeros in its place: the model's init stays cheap.

Where this differs from Zoology (Z) or official RWKV-7 (BlinkDL's RWKV-LM, O):
  * μ (x_x), k_k, k_a, r_k start at ZERO, as in Z (its init hook never matches an nn.Parameter);
    O starts them at layer-dependent ratios, k_k ≈ 0.71 − 0.1·(layer fraction), k_a = 1.02,
    r_k = −0.04. With zeros every branch reads the current token only, κ̂ = 0 (no removal),
    k̃ = k and no bonus until training moves them.
  * Every Linear (projections and LoRA factors) starts N(0, 0.02) with zero biases: Z's
    model-wide init, which overrides its mixer's own xavier init (O: receptance and value
    U(±0.5/√D), key U(±0.05/√D), output 0, LoRA first factors 0, second orthogonal · 0.1,
    and per-channel bias curves w0, a0, in the copies of its RWKV_Tmix_x070 we read).
  * The GroupNorm's eps is K · norm_eps (Z, fla); O's is 64e-5 whatever the head size (the
    same at K = 64).
  * The decay −e^{−½} σ(u) is Z's (fla's) form; it equals O's −exp(−softplus(−(w0 + u)) − ½)
    with O's w0 as the LoRA's output bias, so the map is the same.
  * O's value residual (v_lora mixing v with the first layer's v, layers > 0) is left out: Z
    builds v_lora for layers > 0 but its forward never receives v_first, so it is never used.
  * Z's defaults for its MQAR configs: decay rank 16, a rank 16, gate rank 64, norm_eps 1e-5
    (its head size 64 becomes here the model's H heads, K = D / H). Z's MQAR models put a
    BaseConv before it inside its Hybrid mixer: that pairing is the model's, not this mixer's.

State per sequence and layer: H·K·K floats (the matrices) plus D (the previous token, for the
shift): H·K² + D.

Glossary: B batch, T tokens, D width, H heads, K head size (D / H), C chunk, G cumulative log
decay within a chunk, α = −κ̂ and β = κ̂ ⊙ a (the removal's two vectors).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import haiku as hk
import jax
import jax.numpy as jnp

from src.models.mixers.kit import check_chunk, register_mixer, OptionsMixer
from src.models.mixers.delta_rule import unit_lower_solve

CHUNK = 16
L2_EPS = 1e-6  # κ̂ = z / sqrt(Σz² + eps), flash-linear-attention's l2norm
DECAY_SCALE = math.exp(-0.5)  # w = −e^{−½} σ(·)
ZOOLOGY_INIT = hk.initializers.RandomNormal(0.02)  # Zoology's N(0, 0.02) for every Linear
BRANCHES = ("r", "w", "k", "v", "a", "g")  # the rows of x_x


def recurrent_rwkv7(r, w, k, v, alpha, beta):
    """r, w, k, v, alpha, beta [B, T, H, K] -> o [B, T, H, K], one position at a time:
    S_t = diag(exp w_t) S_{t−1} + β_t (α_tᵀ S_{t−1}) + k_t v_tᵀ, o_t = Sᵀ_t r_t."""

    def step(state, inputs):  # state [B, H, K, K]
        r_t, w_t, k_t, v_t, a_t, b_t = inputs
        removal = jnp.einsum("bhk,bhkv->bhv", a_t, state)  # αᵀ S_{t−1}
        state = (
            jnp.exp(w_t)[..., None] * state
            + b_t[..., :, None] * removal[..., None, :]
            + k_t[..., :, None] * v_t[..., None, :]
        )
        return state, jnp.einsum("bhkv,bhk->bhv", state, r_t)

    b, _, h, size = r.shape
    state = jnp.zeros((b, h, size, v.shape[-1]), r.dtype)
    _, ys = jax.lax.scan(step, state, tuple(jnp.moveaxis(a, 1, 0) for a in (r, w, k, v, alpha, beta)))
    return jnp.moveaxis(ys, 0, 1)


def _chunk_pairs(r_c, k_c, a_c, b_c, cum, before, chunk: int, factorised: bool):
    """chunked_rwkv7's pairwise coefficients within each chunk, M, N, P, Q [B, N, H, C(t), C(s)]
    (its docstring's definitions), elementwise or factorised."""
    if factorised:
        strict, upto = (jnp.tril(jnp.ones((chunk, chunk), bool), d) for d in (-1, 0))
        a_read, r_read_t, fade = a_c * jnp.exp(before), r_c * jnp.exp(cum), jnp.exp(-cum)
        pair = lambda left, right, mask: jnp.where(mask, left @ jnp.swapaxes(right * fade, -1, -2), 0.0)
        m, nk = pair(a_read, b_c, strict), pair(a_read, k_c, strict)  # [B, N, H, C(t), C(s)]
        p, q = pair(r_read_t, b_c, upto), pair(r_read_t, k_c, upto)
    else:

        def decays(read, strict: bool):
            """e^{read_t − G_s} [B, N, H, C(t), C(s), K] where s < t (strict) or s <= t, else 0."""
            mask = jnp.tril(jnp.ones((chunk, chunk), bool), -1 if strict else 0)[:, :, None]
            gap = read[..., :, None, :] - cum[..., None, :, :]
            return jnp.where(mask, jnp.exp(jnp.where(mask, gap, 0.0)), 0.0)  # no exp of a positive gap

        a_decayed = a_c[..., :, None, :] * decays(before, True)  # α_t e^{G_{t−1} − G_s}, s < t
        r_decayed = r_c[..., :, None, :] * decays(cum, False)  # r_t e^{G_t − G_s}, s <= t
        pair = lambda decayed, right: jnp.sum(decayed * right[..., None, :, :], -1)  # [B, N, H, C(t), C(s)]
        m, nk = pair(a_decayed, b_c), pair(a_decayed, k_c)
        p, q = pair(r_decayed, b_c), pair(r_decayed, k_c)
    return m, nk, p, q


@functools.partial(jax.jit, static_argnames=("chunk", "factorised"))
def chunked_rwkv7(r, w, k, v, alpha, beta, chunk: int = CHUNK, factorised: bool = False):
    """The map of `recurrent_rwkv7` for log decays w <= 0, C positions at a time (jitted: an eager
    call compiles it once instead of op by op). T is padded to a multiple of C with zeros (w = 0,
    k = v = α = β = 0) after every real position, which changes nothing before it.

    Within a chunk (S the incoming state, G_t = Σ_{s<=t} w_s, u_t = α_tᵀ S_{t−1}):
      u_t = (α_t ⊙ e^{G_{t−1}})ᵀ S + Σ_{s<t} M_ts u_s + Σ_{s<t} N_ts v_s,
          M_ts = Σ_i α_ti β_si e^{G_{t−1,i} − G_si},  N_ts the same with k_s for β_s
      o_t = (r_t ⊙ e^{G_t})ᵀ S + Σ_{s<=t} P_ts u_s + Σ_{s<=t} Q_ts v_s,
          P_ts = Σ_i r_ti β_si e^{G_ti − G_si},  Q_ts the same with k_s
      S' = diag(e^{G_C}) S + Σ_s (β_s ⊙ e^{G_C − G_s}) u_sᵀ + Σ_s (k_s ⊙ e^{G_C − G_s}) v_sᵀ
    The first line is (I − M) U = Ã S + N V: solved once per chunk for S's coefficient W and the
    rest U₀ (U = W S + U₀), so only the carry of S is a lax.scan over chunks.

    `factorised`: the pairwise sums as matrix products, e^{G_t − G_s} = e^{G_t} e^{−G_s} (with
    the masked entries dropped after the product), instead of a [B, N, H, C, C, K] tensor of
    decays; the factors reach e^{C·max|w|}, so it is for bounded decays only: RWKV-7's
    w >= −e^{−½} gives at most e^{9.7} at C = 16 (the mixer's setting, 2026-11-28: 4.3x faster
    at the study cell). Unbounded decays (the default) take the elementwise form, every exponent <= 0."""
    b, t, h, size = r.shape
    pad = (-t) % chunk
    inputs = (r, w, k, v, alpha, beta)
    if pad:
        inputs = tuple(jnp.pad(a, ((0, 0), (0, pad), (0, 0), (0, 0))) for a in inputs)
    n = (t + pad) // chunk
    r_c, w_c, k_c, v_c, a_c, b_c = (
        jnp.moveaxis(a.reshape(b, n, chunk, h, -1), 3, 2) for a in inputs
    )  # [B, N, H, C, K]
    cum = jnp.cumsum(w_c, axis=3)  # G_t
    before = cum - w_c  # G_{t−1}

    m, nk, p, q = _chunk_pairs(r_c, k_c, a_c, b_c, cum, before, chunk, factorised)
    system = jnp.eye(chunk) - m
    solved = unit_lower_solve(system, jnp.concatenate([a_c * jnp.exp(before), nk @ v_c], -1))
    w_s, u_s = solved[..., :size], solved[..., size:]  # U = w_s S + u_s
    r_read = r_c * jnp.exp(cum)
    local = q @ v_c  # Σ_{s<=t} Q_ts v_s
    last = cum[..., -1, :]  # G_C [B, N, H, K]
    to_end = jnp.exp(last[..., None, :] - cum)  # e^{G_C − G_s} <= 1
    b_end = b_c * to_end
    added = jnp.einsum("...ck,...cv->...kv", k_c * to_end, v_c)

    def per_chunk(state, chunk_inputs):  # state [B, H, K, K]
        w_n, u_n, r_n, p_n, local_n, b_n, added_n, last_n = chunk_inputs
        removal = jnp.einsum("bhck,bhkv->bhcv", w_n, state) + u_n  # U: α_tᵀ S_{t−1}
        y = jnp.einsum("bhck,bhkv->bhcv", r_n, state) + jnp.einsum("bhcs,bhsv->bhcv", p_n, removal) + local_n
        state = jnp.exp(last_n)[..., None] * state + jnp.einsum("bhck,bhcv->bhkv", b_n, removal) + added_n
        return state, y

    state = jnp.zeros((b, h, size, v.shape[-1]), r.dtype)
    _, ys = jax.lax.scan(
        per_chunk, state, tuple(jnp.moveaxis(a, 1, 0) for a in (w_s, u_s, r_read, p, local, b_end, added, last))
    )
    ys = jnp.moveaxis(ys, 0, 1)  # [B, N, H, C, K]
    return jnp.moveaxis(ys, 2, 3).reshape(b, n * chunk, h, -1)[:, :t]


def _rank_ok(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


@dataclass(frozen=True)
class RWKV7Options:
    decay_low_rank_dim: int = 16  # rank of LoRA_w (the decay)
    a_low_rank_dim: int = 16  # rank of LoRA_a (the in-context learning rate)
    gate_low_rank_dim: int = 64  # rank of LoRA_g (the output gate)
    norm_eps: float = 1e-5  # the GroupNorm's eps is K · norm_eps
    chunk: int = CHUNK  # positions per chunk of the chunked form (changes float rounding only)

    def check(self) -> None:
        check_chunk(self.chunk)
        for name in ("decay_low_rank_dim", "a_low_rank_dim", "gate_low_rank_dim"):
            value = getattr(self, name)
            if not _rank_ok(value):
                raise ValueError(f"{name}={value!r}; accepted: an integer >= 1")
        eps = self.norm_eps
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) or eps <= 0:
            raise ValueError(f"norm_eps={eps!r}; accepted: a finite number > 0")


class RWKV7(OptionsMixer):
    @staticmethod
    def _linear(size: int, name: str, with_bias: bool = False):
        return hk.Linear(size, with_bias=with_bias, w_init=ZOOLOGY_INIT, name=name)

    def _lora(self, x, rank: int, activation, with_bias: bool, name: str):
        """activation(x A) B (+ bias): A [D, rank] `<name>_down`, B [rank, D] `<name>_up`."""
        return self._linear(x.shape[-1], f"{name}_up", with_bias)(activation(self._linear(rank, f"{name}_down")(x)))

    def __call__(self, x):
        b, t, d = x.shape
        h, o = self.num_heads, self.options
        size = d // h
        mix = hk.get_parameter("x_x", [len(BRANCHES), d], init=jnp.zeros).astype(x.dtype)
        k_k = hk.get_parameter("k_k", [d], init=jnp.zeros).astype(x.dtype)
        k_a = hk.get_parameter("k_a", [d], init=jnp.zeros).astype(x.dtype)
        r_k = hk.get_parameter("r_k", [h, size], init=jnp.zeros).astype(x.dtype)
        norm_weight = hk.get_parameter("g_norm_weight", [d], init=jnp.ones)
        norm_bias = hk.get_parameter("g_norm_bias", [d], init=jnp.zeros)

        shifted = jnp.pad(x, ((0, 0), (1, 0), (0, 0)))[:, :-1]  # x_{t−1}, 0 at t = 0
        delta = shifted - x
        x_r, x_w, x_k, x_v, x_a, x_g = (x + delta * mix[i] for i in range(len(BRANCHES)))
        r = self._linear(d, "r_proj")(x_r)
        k = self._linear(d, "k_proj")(x_k)
        v = self._linear(d, "v_proj")(x_v)
        w = -DECAY_SCALE * jax.nn.sigmoid(self._lora(x_w, o.decay_low_rank_dim, jnp.tanh, True, "w_lora"))
        a = jax.nn.sigmoid(self._lora(x_a, o.a_low_rank_dim, lambda u: u, True, "a_lora"))
        g = self._lora(x_g, o.gate_low_rank_dim, jax.nn.sigmoid, False, "g_lora")

        heads = lambda u: u.reshape(b, t, h, size)
        kappa = heads(k * k_k)
        kappa = kappa / jnp.sqrt(jnp.sum(kappa * kappa, -1, keepdims=True) + L2_EPS)
        k = k * (1 + (a - 1) * k_a)
        r, w, k, v, a = (heads(u) for u in (r, w, k, v, a))

        f32 = lambda u: u.astype(jnp.float32)
        if hk.running_init():  # init only creates parameters: the recurrence (no parameters) is skipped
            y = jnp.zeros((b, t, h, size), jnp.float32)
        else:
            y = chunked_rwkv7(
                f32(r), f32(w), f32(k), f32(v), f32(-kappa), f32(kappa * a), factorised=True, chunk=self.options.chunk
            )
        mean = jnp.mean(y, -1, keepdims=True)
        var = jnp.mean(jnp.square(y - mean), -1, keepdims=True)
        y = (y - mean) * jax.lax.rsqrt(var + size * o.norm_eps)
        y = (y.reshape(b, t, d) * f32(norm_weight) + f32(norm_bias)).astype(x.dtype)
        bonus = jnp.sum(r * k * r_k, -1, keepdims=True) * v  # the current token's own term
        y = y + bonus.reshape(b, t, d)
        return self._linear(d, "o_proj")(y * g)


register_mixer(
    "rwkv7",
    RWKV7Options,
    "Zoology: RWKV-7 time mixing, a DPLR delta rule (decay, in-context removal, bonus) over a "
    "matrix state per head (chunked), token shift, LoRA decay/rate/gate, GroupNorm per head",
    lambda o, h, n, p: RWKV7(h, o, name=n),
    state=lambda o, d, h, t: h * (d // h) ** 2 + d,
    state_doc="H·K² + D",
)
