"""Mamba-2 (Dao & Gu 2024, "Transformers are SSMs": structured state-space duality, SSD), as
Zoology runs it (`zoology/mixers/mamba2.py`, its unfused path), registry "seq_mixer" `mamba2`.

One input projection, split in this order, z [E] | x [E] | B [N] | C [N] | dt [H]; a causal
depthwise convolution over `d_conv` tokens (with a bias) of the concatenated xBC, then SiLU; per
head h (H heads of P channels, one group: B and C shared by the heads) a scalar decay A_h < 0 and
a matrix state S^h [P, N]:

    Δ_t^h = softplus(dt_t^h + dt_bias_h)
    S_t^h = exp(Δ_t^h A_h) S_{t−1}^h + Δ_t^h x_t^h B_tᵀ        y_t^h = S_t^h C_t + D_h x_t^h
    g = y ⊙ SiLU(z)      out = (g / √(mean_E g² + ε) ⊙ w) W_out        (the gated RMSNorm, ε 1e-5)

Zoology's settings kept: one group (ngroups 1), D one skip per head (D_has_hdim false), the norm
over the gated output and over all E channels (norm_before_gate false, group size E), no Δ limit,
no projection biases, a convolution bias. Initialisation as Zoology's: dt_bias the inverse
softplus (y + log(−expm1(−y))) of Δ ~ logUniform(1e-3, 1e-1) floored at 1e-4, A_log = log U(1, 16)
(A = −exp(A_log)), D = 1, the norm's weight w = 1; the convolution as a PyTorch Conv1d's
(ShortConv); the two projections Haiku's Linear (not PyTorch's). mamba_ssm marks dt_bias, A_log
and D `_no_weight_decay`; the workbench's AdamW decays every parameter alike.

Two forms of one map, both jittable: `chunked_ssd` (SSD's quadratic "dual" form over chunks of C
positions: inside a chunk y = (L ⊙ C Bᵀ)(Δ x) with L[c, s] = exp(Σ_{s<j≤c} Δ_j A) for s ≤ c, else
0, plus the carried state's term exp(Σ_{j≤c} Δ_j A) S C_c; the state crosses chunks by lax.scan)
is what the mixer trains with; `recurrent_ssd` (one position at a time) is the reference it is
tested against.

Zoology runs the mixer inside its Mamba2Block (RMSNorm, mixer, residual; no MLP). Here it is a
sequence mixer of the one sequence family, so its block is the family's: norm, mixer, residual,
then the state mixer of choice (`none` for Zoology's block). The heads are the model's (Zoology:
E / headdim, headdim 64), d_state defaults to 16 (Zoology's 128; its MQAR configs use 8, 16, 24),
and the chunk is 64 positions (Zoology's 256; the chunk changes float rounding only).

State per sequence and layer: H·P·N floats (the SSM) plus the convolution's last d_conv − 1
inputs of xBC, (d_conv − 1)·(E + 2N).

Glossary: B batch (B_t the SSM's input matrix), T tokens, D width, E inner width (expand·D),
H heads, P head size (E / H), N state size (d_state), C chunk.
"""

from __future__ import annotations

from dataclasses import dataclass

import haiku as hk
import jax
import jax.numpy as jnp

from src.models.mixers.kit import check_chunk, register_mixer, OptionsMixer
from src.models.mixers.convolutions import ShortConv
from src.models.mixers.mamba import dt_bias_init

CHUNK = 64
NORM_EPS = 1e-5  # the gated RMSNorm's (Zoology's)
A_MIN, A_MAX = 1.0, 16.0  # A_init_range


def recurrent_ssd(x, delta, a, b, c, d):
    """x [B, T, H, P], delta [B, T, H] (Δ > 0), a [H] (< 0), b, c [B, T, N], d [H] -> y [B, T, H, P]
    of S_t = exp(Δ_t a) S_{t−1} + Δ_t x_t b_tᵀ, y_t = S_t c_t + d x_t (S_0 = 0), one position at a
    time."""

    def step(state, inputs):  # state [B, H, P, N]
        x_t, delta_t, b_t, c_t = inputs
        decay = jnp.exp(delta_t * a)[..., None, None]
        state = decay * state + jnp.einsum("bhp,bn->bhpn", delta_t[..., None] * x_t, b_t)
        return state, jnp.einsum("bhpn,bn->bhp", state, c_t)

    batch, _, h, size = x.shape
    state = jnp.zeros((batch, h, size, b.shape[-1]), x.dtype)
    _, ys = jax.lax.scan(step, state, tuple(jnp.moveaxis(u, 1, 0) for u in (x, delta, b, c)))
    return jnp.moveaxis(ys, 0, 1) + d[:, None] * x


def chunked_ssd(x, delta, a, b, c, d, chunk: int | None = None):
    """The map of `recurrent_ssd`, C positions at a time (C = CHUNK unless given). T is padded to
    a multiple of C with Δ = 0 and x = 0 after every real position, which changes nothing before
    it. Exponents are differences of cumulative sums of Δ a, masked before exp (s ≤ c only, so
    every exponent is ≤ 0)."""
    chunk = chunk or CHUNK
    batch, t, h, size = x.shape
    pad = (-t) % chunk
    if pad:
        x = jnp.pad(x, ((0, 0), (0, pad), (0, 0), (0, 0)))
        delta, b, c = (jnp.pad(u, ((0, 0), (0, pad), (0, 0))) for u in (delta, b, c))
    n = (t + pad) // chunk
    x_c = x.reshape(batch, n, chunk, h, size)  # [B, n, C, H, P]
    delta_c = delta.reshape(batch, n, chunk, h)  # [B, n, C, H]
    b_c, c_c = (u.reshape(batch, n, chunk, -1) for u in (b, c))  # [B, n, C, N]
    cum = jnp.cumsum(delta_c * a, axis=2)  # Σ_{j≤c} Δ_j a
    lower = jnp.tril(jnp.ones((chunk, chunk), bool))
    exponent = cum[:, :, :, None, :] - cum[:, :, None, :, :]  # [B, n, C(c), C(s), H]
    decay = jnp.exp(jnp.where(lower[..., None], exponent, -jnp.inf))  # L[c, s]
    drive = delta_c[..., None] * x_c  # Δ x [B, n, C, H, P]
    scores = jnp.einsum("bzcn,bzsn->bzcs", c_c, b_c)  # C Bᵀ
    y_intra = jnp.einsum("bzcsh,bzcs,bzshp->bzchp", decay, scores, drive)
    to_end = jnp.exp(cum[:, :, -1:] - cum)  # exp(cum_end − cum_s)
    chunk_states = jnp.einsum("bzsh,bzshp,bzsn->bzhpn", to_end, drive, b_c)  # [B, n, H, P, N]
    chunk_decay = jnp.exp(cum[:, :, -1])  # exp(total) [B, n, H]

    def carry(state, inputs):  # state [B, H, P, N]
        decay_n, states_n = inputs
        return decay_n[..., None, None] * state + states_n, state

    start = jnp.zeros((batch, h, size, b.shape[-1]), x.dtype)
    _, starts = jax.lax.scan(carry, start, (jnp.moveaxis(chunk_decay, 1, 0), jnp.moveaxis(chunk_states, 1, 0)))
    starts = jnp.moveaxis(starts, 0, 1)  # S at each chunk's start
    y_inter = jnp.einsum("bzch,bzhpn,bzcn->bzchp", jnp.exp(cum), starts, c_c)
    y = (y_intra + y_inter).reshape(batch, n * chunk, h, size)[:, :t]
    return y + d[:, None] * x[:, :t]


@dataclass(frozen=True)
class Mamba2Options:
    d_state: int = 16  # N (Zoology's MQAR configs: 8, 16, 24)
    d_conv: int = 4  # the convolution over xBC (tokens)
    expand: int = 2  # E = expand · D
    chunk: int = CHUNK  # positions per chunk of the dual form (changes float rounding only)

    def check(self) -> None:
        check_chunk(self.chunk)
        for name in ("d_state", "d_conv", "expand"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r}; accepted: an integer >= 1")


def _a_log_init(shape, dtype):
    """log A, A ~ U(A_MIN, A_MAX)."""
    return jnp.log(jax.random.uniform(hk.next_rng_key(), shape, dtype, A_MIN, A_MAX))


class Mamba2(OptionsMixer):
    def __call__(self, x):
        batch, t, width = x.shape
        o, h = self.options, self.num_heads
        inner, n = o.expand * width, o.d_state
        if inner % h:
            raise ValueError(
                f"expand={o.expand}; accepted: an integer making expand·width ({inner}) divisible by the {h} heads"
            )
        size = inner // h
        zxbcdt = hk.Linear(2 * inner + 2 * n + h, with_bias=False, name="in_proj")(x)
        z, xbc, dt = jnp.split(zxbcdt, [inner, 2 * inner + 2 * n], axis=-1)
        xbc = jax.nn.silu(ShortConv(o.d_conv, name="conv")(xbc))
        u, b, c = jnp.split(xbc, [inner, inner + n], axis=-1)
        dt_bias = hk.get_parameter("dt_bias", [h], x.dtype, dt_bias_init)
        a_log = hk.get_parameter("A_log", [h], x.dtype, _a_log_init)
        skip = hk.get_parameter("D", [h], x.dtype, hk.initializers.Constant(1.0))
        delta = jax.nn.softplus(dt + dt_bias)
        y = chunked_ssd(u.reshape(batch, t, h, size), delta, -jnp.exp(a_log), b, c, skip, chunk=self.options.chunk)
        gated = y.reshape(batch, t, inner) * jax.nn.silu(z)
        normed = hk.RMSNorm(axis=-1, eps=NORM_EPS, name="norm")(gated)
        return hk.Linear(width, with_bias=False, name="out_proj")(normed)


register_mixer(
    "mamba2",
    Mamba2Options,
    "Zoology: Mamba-2 (SSD), a scalar decay per head over a matrix state, chunked dual form, "
    "conv over xBC, gated RMSNorm",
    lambda o, h, n, p: Mamba2(h, o, name=n),
    state=lambda o, d, h, t: h * (o.expand * d // h) * o.d_state + (o.d_conv - 1) * (o.expand * d + 2 * o.d_state),
    state_doc="H·P·N + (d_conv − 1)·(E + 2N)",
)
