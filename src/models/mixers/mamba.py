"""Mamba (Gu & Dao 2023), the selective state-space sequence mixer (registry "seq_mixer" entry
`mamba`), x [B, T, D] -> [B, T, D]; the length study's `mamba` backbone (Lin et al. AAAI 2025)
and the state-space row of the ICL benchmark (Zoology's question: attention or recurrence?).

    u, z = x W_in                                  [B, T, E] each, E = expand · D
    u = SiLU(causal depthwise conv_k(u))           kernel k, a bias per channel
    Δ = softplus(u W_Δ↓ W_Δ↑ + b_Δ)   B_t, C_t = u W_B, u W_C        Δ [B, T, E]; B, C [B, T, N]
    h_t = exp(Δ_t A) ⊙ h_{t−1} + (Δ_t u_t) ⊗ B_t    A = −exp(A_log) diagonal [E, N]; h [E, N]
    y_t = h_t C_t + D ⊙ u_t,   out = (y ⊙ SiLU(z)) W_out

Δ, B and C depend on the input (the "selective" part). The recurrence is linear in h, so it trains
with a parallel associative scan (`selective_scan`: the pair (a, b) of h_t = a_t h_{t−1} + b_t
composes as (a₁, b₁)∘(a₂, b₂) = (a₁a₂, a₂b₁ + b₂)), in chunks of `SCAN_CHUNK` positions with the
state carried between chunks, so a long evaluation prompt needs memory for one chunk's [C, B, E, N]
only. On the CPU a plain step-per-position lax.scan is faster (option `scan`, `scan_form`); both
forms compute the same recurrence (tests: each against a float64 NumPy loop, ≤ 1e-5). Initialisation follows the
reference (and Hugging Face's MambaMixer): A_log = log(1 … N)
per channel, D = 1, b_Δ the inverse softplus of Δ ~ logUniform(0.001, 0.1) floored at 1e-4;
W_Δ↑ uniform ±R^−½. Projections have no biases.

Glossary: B batch, T tokens, D width, E inner width, N state size, R rank of Δ, k conv kernel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import haiku as hk
import jax
import jax.numpy as jnp

from src.models.mixers.kit import register_mixer
from src.settings import require_int, require_one_of

SCAN_CHUNK = 64
SCAN_FORMS = ("auto", "associative", "sequential")
DT_MIN, DT_MAX, DT_FLOOR = 1e-3, 1e-1, 1e-4


@dataclass(frozen=True)
class MambaOptions:
    state_size: int = 16  # N (Hugging Face MambaConfig.state_size)
    expand: int = 2  # E = expand · D
    conv_kernel: int = 4  # k
    dt_rank: int = 0  # R; 0 = ⌈D / 16⌉ (the reference's "auto")
    scan: str = "auto"  # associative | sequential | auto (scan_form: associative off the CPU)

    def check(self) -> None:
        require_int("state_size", self.state_size, 1, 1024)
        require_int("expand", self.expand, 1, 16)
        require_int("conv_kernel", self.conv_kernel, 1, 64)
        require_int("dt_rank", self.dt_rank, 0, 4096)
        require_one_of("scan", self.scan, SCAN_FORMS)


def _combine(earlier, later):
    """(a₁, b₁)∘(a₂, b₂) = (a₁a₂, a₂b₁ + b₂): h ↦ a₁h + b₁, then h ↦ a₂h + b₂."""
    decay_1, state_1 = earlier
    decay_2, state_2 = later
    return decay_1 * decay_2, decay_2 * state_1 + state_2


def _associative(u, delta, a, b, c, d, chunk: int):
    """Time-major [T, B, .] inputs: an associative scan inside each chunk of `chunk` positions,
    the state carried across chunks by lax.scan (memory: one chunk's [C, B, E, N])."""
    t, batch, e = u.shape
    size = min(t, chunk)
    pad = (-t) % size
    if pad:  # trailing padding: nothing before it changes
        u, delta, b, c = (jnp.pad(x, ((0, pad), (0, 0), (0, 0))) for x in (u, delta, b, c))
    chunks = [x.reshape(-1, size, *x.shape[1:]) for x in (u, delta, b, c)]

    def one_chunk(state, inputs):  # state [B, E, N]
        u_c, delta_c, b_c, c_c = inputs
        decay = jnp.exp(delta_c[..., None] * a)  # [C, B, E, N]
        drive = (delta_c * u_c)[..., None] * b_c[:, :, None, :]  # [C, B, E, N]
        decay_prefix, h = jax.lax.associative_scan(_combine, (decay, drive), axis=0)
        h = h + decay_prefix * state
        return h[-1], jnp.einsum("tben,tbn->tbe", h, c_c) + d * u_c

    state = jnp.zeros((batch, e, a.shape[-1]), u.dtype)
    _, ys = jax.lax.scan(one_chunk, state, tuple(chunks))
    return ys.reshape(-1, batch, e)[:t]


def _sequential(u, delta, a, b, c, d):
    """Time-major [T, B, .] inputs: one lax.scan step per position."""

    def step(h, inputs):
        u_t, delta_t, b_t, c_t = inputs
        h = jnp.exp(delta_t[..., None] * a) * h + (delta_t * u_t)[..., None] * b_t[:, None, :]
        return h, jnp.einsum("ben,bn->be", h, c_t) + d * u_t

    state = jnp.zeros((u.shape[1], u.shape[2], a.shape[-1]), u.dtype)
    return jax.lax.scan(step, state, (u, delta, b, c))[1]


def selective_scan(u, delta, a, b, c, d, form: str = "associative", chunk: int = SCAN_CHUNK):
    """u, delta [B, T, E], a [E, N] (< 0), b, c [B, T, N], d [E] -> y [B, T, E] of
    h_t = exp(Δ_t a) ⊙ h_{t−1} + (Δ_t u_t) ⊗ b_t, y_t = h_t c_t + d ⊙ u_t (h_0 = 0), by the
    chunked associative scan or (form "sequential") one step per position."""
    time_major = [jnp.swapaxes(x, 0, 1) for x in (u, delta, b, c)]
    if form == "sequential":
        y = _sequential(time_major[0], time_major[1], a, time_major[2], time_major[3], d)
    else:
        y = _associative(time_major[0], time_major[1], a, time_major[2], time_major[3], d, chunk)
    return jnp.swapaxes(y, 0, 1)


def scan_form(option: str) -> str:
    """`auto`: the associative scan on an accelerator, the sequential one on the CPU, where XLA
    runs it about 3x faster (forward and backward at B 64, T 64, E 128, N 16 on 2 cores: 85 ms
    sequential, 218 ms associative)."""
    if option != "auto":
        return option
    return "sequential" if jax.default_backend() == "cpu" else "associative"


def causal_depthwise_conv(u, kernel, bias):
    """u [B, T, E], kernel [k, E], bias [E] -> [B, T, E]: out_t = Σ_j kernel[j] u_{t−k+1+j} + bias
    (zeros before the first token)."""
    k = kernel.shape[0]
    padded = jnp.pad(u, ((0, 0), (k - 1, 0), (0, 0)))
    t = u.shape[1]
    return sum(kernel[j] * padded[:, j : j + t] for j in range(k)) + bias


def dt_bias_init(shape, dtype):
    """The inverse softplus of Δ ~ logUniform(DT_MIN, DT_MAX), floored at DT_FLOOR (Mamba's Δ bias;
    Mamba-2's and Gated DeltaNet's too)."""
    key = hk.next_rng_key()
    log_dt = jax.random.uniform(key, shape, dtype, math.log(DT_MIN), math.log(DT_MAX))
    dt = jnp.maximum(jnp.exp(log_dt), DT_FLOOR)
    return dt + jnp.log(-jnp.expm1(-dt))


class Mamba(hk.Module):
    def __init__(self, options: MambaOptions, name: str | None = None):
        super().__init__(name=name)
        self.options = options

    def __call__(self, x):
        o = self.options
        width = x.shape[-1]
        inner, n, rank = o.expand * width, o.state_size, o.dt_rank or math.ceil(width / 16)
        u, z = jnp.split(hk.Linear(2 * inner, with_bias=False, name="in_proj")(x), 2, axis=-1)
        fan = o.conv_kernel**-0.5  # depthwise: fan-in k
        kernel = hk.get_parameter("conv_kernel", (o.conv_kernel, inner), init=hk.initializers.RandomUniform(-fan, fan))
        conv_bias = hk.get_parameter("conv_bias", (inner,), init=hk.initializers.RandomUniform(-fan, fan))
        u = jax.nn.silu(causal_depthwise_conv(u, kernel, conv_bias))
        dt, b, c = jnp.split(hk.Linear(rank + 2 * n, with_bias=False, name="x_proj")(u), [rank, rank + n], axis=-1)
        dt_weight = hk.get_parameter(
            "dt_proj_w", (rank, inner), init=hk.initializers.RandomUniform(-(rank**-0.5), rank**-0.5)
        )
        dt_bias = hk.get_parameter("dt_proj_b", (inner,), init=dt_bias_init)
        delta = jax.nn.softplus(dt @ dt_weight + dt_bias)
        a_log = hk.get_parameter(
            "A_log",
            (inner, n),
            init=lambda shape, dtype: jnp.broadcast_to(jnp.log(jnp.arange(1, n + 1, dtype=dtype)), shape),
        )
        skip = hk.get_parameter("D", (inner,), init=jnp.ones)
        y = selective_scan(u, delta, -jnp.exp(a_log), b, c, skip, scan_form(o.scan))
        return hk.Linear(width, with_bias=False, name="out_proj")(y * jax.nn.silu(z))


register_mixer(
    "mamba",
    MambaOptions,
    "Mamba: selective state space (input-dependent Δ, B, C; diagonal A), gated, causal conv",
    lambda o, h, n, p: Mamba(o, name=n),
    state=lambda o, d, h, t: o.expand * d * (o.state_size + o.conv_kernel - 1),
    state_doc="E·(N + conv_kernel − 1), E = expand·D",
)
