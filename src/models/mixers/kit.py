"""The mixer kit: what every sequence mixer of src/models/mixers/ is built from and registered
with (registry "seq_mixer"). A mixer maps x [B, T, D] -> [B, T, D] causally (the output at t reads
tokens <= t only).

  register_mixer   registers a mixer: its options, a builder, whether it takes any position
                   encoding (the softmax family) and the floats of recurrent state it keeps
  state_floats     that state for a registered mixer, after T tokens
  project_qkv, project_out   the per-head projections q, k, v [B, T, H, K] and back to [B, T, D]
  causal_mask, local_global_mask   which keys a query sees
  dropout, check_chunk, HeadsMixer   dropout in training, the `chunk` option's check, a module with heads
  OptionsMixer                       a module with heads and its options dataclass

Glossary: B batch, T tokens, D width, H heads, K = D / H head size.
"""

from __future__ import annotations

from pathlib import Path

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from src.flags import UsageError
from src.registry import registry
from src.settings import require_int

MIXERS = registry("seq_mixer")
EPS = 1e-6
MAX_CHUNK = 4096  # the largest `chunk` a mixer with a chunked form accepts


def check_chunk(chunk) -> None:
    """The `chunk` option of a mixer with a chunked form (positions per chunk): one line unless an
    integer in [1, MAX_CHUNK]."""
    require_int("chunk", chunk, 1, MAX_CHUNK)


def causal_mask(t: int, window: int | None = None) -> jax.Array:
    """[T, T] bool: key s visible from query t (s <= t, and s > t − window if given)."""
    return jnp.asarray(_causal_mask(t, window))


def _causal_mask(t: int, window: int | None = None) -> np.ndarray:
    """`causal_mask` in NumPy (a constant of the traced program: built before any jnp call)."""
    rows, cols = np.arange(t)[:, None], np.arange(t)[None, :]
    mask = cols <= rows
    if window is not None:
        mask &= cols > rows - window
    return mask


def local_global_mask(t: int, window: int | None, global_positions: tuple = ()) -> jax.Array:
    """[T, T] bool, limits_of_icl's `local_global`: the causal window, and every global position g
    (a token index) both seen by every later query and, as a query, seeing every earlier key."""
    mask = _causal_mask(t, window)
    for g in global_positions:
        if g < t:
            mask[g, : g + 1] = True
            mask[g:, g] = True
    return jnp.asarray(mask)


def dropout(x: jax.Array, rate: float) -> jax.Array:
    """x with each element zeroed with probability `rate`, the others scaled by 1 / (1 − rate), where
    `apply` got a dropout key (training); x itself at rate 0, at init and without a key (evaluation)."""
    if not rate or hk.running_init():
        return x
    key = hk.maybe_next_rng_key()
    return x if key is None else hk.dropout(key, rate, x)


def project_qkv(x: jax.Array, num_heads: int, kv_heads: int | None = None, bias: bool = False):
    """One fused projection [D, (H + 2 H_kv) K] (called inside a mixer module), split into
    q [B, T, H, K] and k, v [B, T, H_kv, K]."""
    b, t, d = x.shape
    kv_heads = kv_heads or num_heads
    k_size = d // num_heads
    sizes = (num_heads, kv_heads, kv_heads)
    fused = hk.Linear(sum(sizes) * k_size, with_bias=bias, name="qkv")(x)
    q, k, v = jnp.split(fused, np.cumsum(sizes)[:2] * k_size, axis=-1)
    return tuple(a.reshape(b, t, h, k_size) for a, h in zip((q, k, v), sizes))


def project_out(y: jax.Array, width: int, bias: bool = False) -> jax.Array:
    """Heads [B, T, H, K] concatenated and projected back to [B, T, D]."""
    b, t = y.shape[:2]
    return hk.Linear(width, with_bias=bias, name="out")(y.reshape(b, t, -1))


class HeadsMixer(hk.Module):
    """A mixer module with `num_heads` heads (its projections split D into H heads of K = D / H)."""

    def __init__(self, num_heads: int, name: str | None = None):
        super().__init__(name=name)
        self.num_heads = num_heads


class OptionsMixer(HeadsMixer):
    """A mixer module with heads and a frozen options dataclass (`self.options`)."""

    def __init__(self, num_heads: int, options, name: str | None = None):
        super().__init__(num_heads, name=name)
        self.options = options


def _check(width: int, num_heads: int) -> None:
    if width % num_heads:
        raise ValueError(f"n_embd={width} must be divisible by n_head={num_heads}")


def register_mixer(name: str, options, doc: str, make, *, softmax: bool = False, state=None, state_doc: str = ""):
    """Register mixer `name`; `make(options, num_heads, module_name, position)` builds it. A
    softmax-family mixer takes any position encoding (it rotates q, k and adjusts scores); the
    others only those acting on the embeddings (require_plain). Options with a `check()` method
    are checked first (ValueError naming the option). `state(options, width, num_heads, tokens)`
    is the floats of recurrent state the mixer keeps per sequence and layer to produce its next
    output (what generation would carry: the keys and values of attention, a recurrent mixer's
    state), `state_doc` the same as a formula for `--choices`."""

    def build(opts, *, width: int, num_heads: int, position=None, name: str | None = None):
        _check(width, num_heads)
        if hasattr(opts, "check"):
            opts.check()
        if position is not None and not softmax:
            position.require_plain(build.mixer_name)
        return make(opts, num_heads, name, position if softmax else None)

    build.mixer_name = name
    build.defined_in = (make.__code__.co_filename, make.__code__.co_firstlineno)  # the mixer's own file
    build.takes_any_position = softmax
    build.forms_softmax_weights = softmax  # recorded under recording_attention (analysis.recency)
    build.state_floats, build.state_doc = state, state_doc
    MIXERS.register(name, options, doc=doc)(build)


def check_lengths(model, tokens: int) -> None:
    """The options of `model`'s sequence mixers (a SequenceConfig) that depend on the sequence, for
    `tokens` tokens (an options class's `check_length(tokens)`; SettingsError naming the option
    by its path, model.seq_mixer.options.<key> or model.seq_mixers[i].options.<key>)."""
    from src.settings import SettingsError

    named = (
        [(f"model.seq_mixers[{i}].options.", c) for i, c in enumerate(model.seq_mixers)]
        if model.seq_mixers
        else [("model.seq_mixer.options.", model.seq_mixer)]
    )
    for prefix, choice in named:
        check = getattr(choice.options, "check_length", None)
        try:
            if check is not None:
                check(tokens)
        except ValueError as err:
            raise SettingsError(prefix + str(err)) from None


def state_floats(name: str, options, *, width: int, num_heads: int, tokens: int) -> int:
    """Floats of recurrent state mixer `name` keeps per sequence and layer after `tokens` tokens
    (register_mixer's `state`)."""
    return int(MIXERS.get(name).build.state_floats(options, width, num_heads, tokens))


class MixerError(UsageError):
    """A sequence mixer that raised or returned another shape while the model was built: one line
    naming the mixer and its file (exit 2); WORKBENCH_DEBUG=1 prints the traceback too."""


def apply_mixer(name: str, module, x: jax.Array) -> jax.Array:
    """module(x) for seq_mixer `name`, checked while the model is traced (at build, before any
    training): MixerError when it raises or when its output is not x's shape [B, T, D]."""
    import traceback
    from src.registry import defined_in

    where = defined_in(MIXERS.get(name)) or ("?", 0)
    try:
        y = module(x)
    except UsageError:
        raise
    except Exception as err:  # noqa: BLE001 - the user's code: named, whatever it raised
        frames = [f for f in traceback.extract_tb(err.__traceback__) if f.filename == where[0]]
        line = frames[-1].lineno if frames else where[1]
        first = (str(err).strip().splitlines() or [""])[0][:300]
        raise MixerError(
            f"seq_mixer {name!r} ({display_path(where[0])}:{line}) raised {type(err).__name__}: "
            f"{first}; the model was not built (WORKBENCH_DEBUG=1 prints the traceback)"
        ) from err
    if getattr(y, "shape", None) != x.shape:
        raise MixerError(
            f"seq_mixer {name!r} ({display_path(where[0])}:{where[1]}) returned shape "
            f"{tuple(getattr(y, 'shape', ()))} for input {tuple(x.shape)}; accepted: a mixer maps "
            "x [B, T, D] to the same shape"
        )
    return y


def display_path(filename: str) -> str:
    """`filename` relative to the checkout where it is inside it."""
    from src.provenance import ROOT

    try:
        return str(Path(filename).resolve().relative_to(ROOT))
    except ValueError:
        return filename
