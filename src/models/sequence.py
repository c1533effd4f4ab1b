"""The one sequence-model family (registry "family" entry `sequence`): a pre-norm residual stack
whose every part comes from the settings.

    read-in   pairs: Linear(d -> D) of the interleaved tokens x_i, (y_i, 0, …, 0)
              tokens: Embed(V, D)
    + a position encoding (registry "position": a learned table added here, or one acting
      inside softmax attention: rope, alibi, fire, yarn, …)
    n_layer blocks:  h += seq_mixer(norm(h));  h += state_mixer(norm(h))  (`residual` false: h = seq_mixer(norm(h)))
              (registries "norm", "seq_mixer", "state_mixer"); a hybrid stack takes its layers'
              sequence mixers from `seq_mixers`, repeating (layer i: seq_mixers[i mod len]),
              e.g. Zoology's Based model (base_conv, based) or MAD's striped hybrids
    final norm, read-out   pairs: Linear(D -> 1) at every x token, ŷ_i from the pairs before i [B, n]
                           tokens: Linear(D -> V) logits [B, T, V]

Presets and blocks (the originals' models; Zoology's own block): src/models/sequence_presets.py.
A preset names the root module, so parameters are `<preset>/block_<i>/seq_mixer/...`;
`canonical_param_name` reads the names of params.npz files written before the two models were
one family. Dropout (`embed_dropout`, softmax_causal's `dropout`) acts only where `apply` gets a
key (`rng`, the lm system's training step); at rate 0 nothing is drawn. `positions_for:
attention` leaves a model without a softmax-attention layer with no position encoding (no table).

Dense layout (`dense_layout`): every Linear layer of the stack sees its activations as rows,
[B·T, D] (`flat`, the default), or as they come, [B, T, D] (`batched`). The function is the
same; on XLA's CPU backend the backward pass of a dense layer on 3-D activations is slow, and
`flat` trains 1.3-1.9x faster (docs/workbench.md). The two differ in float32 rounding only
(about 1e-6 after tens of steps); the runs recorded before 2026-11-26, the golden runs among
them, are `batched`.

Attention kernel (`attention_kernel`): the softmax family's attention as two einsums around a
softmax (`einsum`, the default and every recorded run's) or as `jax.nn.dot_product_attention`
(`fused`: cuDNN's fused kernel on a GPU for bfloat16 inputs, XLA's own composition elsewhere),
where the position encoding leaves the scores alone (learned, rope, nope, ...; alibi, fire and
yarn adjust them and keep the einsums). The same function up to float rounding.

Glossary: B batch, n pairs, d input dim, T tokens (2n for pairs), D width, H heads, V vocabulary.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import haiku as hk
import jax
import jax.numpy as jnp

from src.models.mixers.attention import ATTENTION_KERNELS

from src.models.mixers.kit import apply_mixer, dropout
from src.models.positions import Encoding
from src.registry import Choice, registry
from src.settings import (
    added_field,
    choice_field,
    choices_field,
    is_int,
    require,
    require_int,
    require_number,
    require_one_of,
)

INPUTS = ("pairs", "tokens")
READ_OUTS = ("next_token", "compress")
POSITIONS_FOR = ("all", "attention")  # which models take the position encoding (see SequenceConfig)


@dataclass(frozen=True)
class SequenceConfig:
    preset: str = "gpt2"  # the root module's name (gpt2 | lm | llama | mamba): how its parameters are named
    inputs: str = "pairs"  # pairs (x/y tokens, ŷ per point) | tokens (embedding, logits)
    width: int = 64  # D
    n_layer: int = 3
    n_head: int = 4
    n_dims: int = 5  # d (pairs)
    vocab_size: int = 0  # V (tokens)
    max_tokens: int = 22  # T the position encoding is trained for (a learned table's length)
    position: Choice = choice_field("position", "learned")
    norm: Choice = choice_field("norm", "layer_norm")
    seq_mixer: Choice = choice_field("seq_mixer", "softmax_causal")
    state_mixer: Choice = choice_field("state_mixer", "mlp")
    biases: bool = True  # the read-in, read-out and state mixer Linear layers have biases
    dense_layout: str = "flat"  # Linear layers on [B·T, D] rows (flat) or on [B, T, D] (batched)
    attention_kernel: str = (
        "einsum"  # softmax attention as two einsums (einsum) or jax.nn.dot_product_attention (fused)
    )
    seq_mixers: tuple[Choice, ...] = choices_field(
        "seq_mixer"
    )  # a hybrid stack's mixers, repeating; empty: seq_mixer everywhere
    residual: bool = added_field(
        True
    )  # h += mixer(norm(h)) (True) or h = mixer(norm(h)) (the lstm preset's plain stack)
    # the position encoding in every model (all), or only in a model with a softmax-attention layer
    # (attention: Zoology's figure 2, whose other models have max_position_embeddings = 0, no table)
    positions_for: str = added_field("all")
    # dropout on the read-in's output (positions added) feeding block 0, in training only (Zoology's embed_dropout)
    embed_dropout: float = added_field(0.0)
    # token inputs: the read-out is the embedding table transposed (Zoology's tied lm_head), the one
    # table drawn from N(0, 0.02²) as Zoology's nn.Embedding; false: a separate unembed Linear
    tie_embeddings: bool = added_field(False)
    # > 0: every weight matrix and embedding table of the stack drawn from N(0, init_std²) (minGPT's
    # 0.02: Edelman et al.'s model), biases and norm scales as they are; 0: each module's own init
    init_std: float = added_field(0.0)
    # token inputs: logits at every position (next_token), or MAD's compression read-out (compress):
    # the last position's state, plus sin-cos positions, through a 2-layer GELU MLP, decoded at every position
    read_out: str = added_field("next_token")

    def check(self) -> None:
        require(
            isinstance(self.preset, str) and re.fullmatch(r"[a-z][a-z0-9_]*", self.preset or ""),
            "preset",
            self.preset,
            "a lower-case name",
        )
        require_one_of("inputs", self.inputs, INPUTS)
        for name, low in (("width", 1), ("n_layer", 1), ("n_head", 1), ("n_dims", 1), ("max_tokens", 1)):
            require_int(name, getattr(self, name), low)
        require(
            is_int(self.vocab_size) and (self.vocab_size >= 2 or self.inputs == "pairs"),
            "vocab_size",
            self.vocab_size,
            "an integer >= 2 for token inputs",
        )
        require(self.width % self.n_head == 0, "width", self.width, f"a multiple of n_head={self.n_head}")
        require(isinstance(self.biases, bool), "biases", self.biases, "true or false")
        require(isinstance(self.residual, bool), "residual", self.residual, "true or false")
        require_one_of("dense_layout", self.dense_layout, tuple(DENSE_LAYOUTS))
        require_one_of("attention_kernel", self.attention_kernel, tuple(ATTENTION_KERNELS))
        require_one_of("positions_for", self.positions_for, POSITIONS_FOR)
        require_number("embed_dropout", self.embed_dropout, 0.0, high=1.0, open_high=True)
        require_number("init_std", self.init_std, 0.0, high=10.0)
        require_one_of("read_out", self.read_out, READ_OUTS)
        require(
            self.read_out == "next_token" or self.inputs == "tokens",
            "read_out",
            self.read_out,
            "next_token for pair inputs (compress: token inputs only)",
        )
        require(
            len(self.seq_mixers) <= self.n_layer,
            "seq_mixers",
            "+".join(m.name for m in self.seq_mixers),
            f"at most n_layer={self.n_layer} mixers (layer i takes the (i mod length)-th; more would go unused)",
        )
        require(
            isinstance(self.tie_embeddings, bool) and (self.inputs == "tokens" or not self.tie_embeddings),
            "tie_embeddings",
            self.tie_embeddings,
            "true or false (true: token inputs only)",
        )

    def layer_mixer(self, layer: int) -> Choice:
        """The sequence mixer of block `layer`."""
        return self.seq_mixers[layer % len(self.seq_mixers)] if self.seq_mixers else self.seq_mixer

    def layer_mixers(self) -> list[Choice]:
        return [self.layer_mixer(i) for i in range(self.n_layer)]

    def mixers_used(self) -> list[Choice]:
        """The sequence mixers the layers take, each position of the stack once, in layer order: what
        a check of the mixers reads (one period of layer_mixers(), never n_layer entries)."""
        return list(self.seq_mixers[: self.n_layer]) if self.seq_mixers else [self.seq_mixer]

    def state_floats(self, tokens: int) -> int:
        """Floats of recurrent state the stack's sequence mixers keep per sequence after `tokens`
        tokens, summed over the layers (register_mixer's `state`)."""
        from src.models.mixers.kit import state_floats

        return sum(
            state_floats(m.name, m.options, width=self.width, num_heads=self.n_head, tokens=tokens)
            for m in self.layer_mixers()
        )

    def mixer_label(self) -> str:
        """The mixer's name, or a hybrid's pattern joined by '+' (base_conv+based)."""
        return "+".join(m.name for m in self.seq_mixers) if self.seq_mixers else self.seq_mixer.name

    def has_attention(self) -> bool:
        """Whether a layer's sequence mixer is of the softmax-attention family."""
        return any(registry("seq_mixer").get(m.name).build.takes_any_position for m in self.mixers_used())

    def uses_positions(self) -> bool:
        """Whether the model takes its position encoding (`positions_for`)."""
        return self.positions_for == "all" or self.has_attention()

    def encoding(self):
        """The position encoding (src/models/positions.py), trained for `max_tokens` tokens; none
        (no table, no parameter) where `positions_for` leaves this model without one."""
        if not self.uses_positions():
            return Encoding()
        entry = registry("position").get(self.position.name)
        return entry.build(self.position.options, trained_tokens=self.max_tokens)

    def has_dropout(self) -> bool:
        """Whether training draws dropout masks (the embeddings' or a mixer's `dropout` option)."""
        return self.embed_dropout > 0 or any(getattr(m.options, "dropout", 0.0) > 0 for m in self.mixers_used())


def interleave(xs: jax.Array, ys: jax.Array) -> jax.Array:
    """x_1, (y_1, 0, ...), x_2, ...: xs [B, n, d], ys [B, n] -> tokens [B, 2n, d]."""
    b, n, d = xs.shape
    y_tokens = jnp.zeros_like(xs).at[..., 0].set(ys)
    return jnp.stack([xs, y_tokens], axis=2).reshape(b, 2 * n, d)


class Block(hk.Module):
    def __init__(self, config: SequenceConfig, position, layer: int = 0, name: str | None = None):
        super().__init__(name=name)
        self.config, self.position, self.layer = config, position, layer

    def __call__(self, h):
        c = self.config
        norm = registry("norm").get(c.norm.name)
        chosen = c.layer_mixer(self.layer)
        mixer = (
            registry("seq_mixer")
            .get(chosen.name)
            .build(chosen.options, width=c.width, num_heads=c.n_head, position=self.position, name="seq_mixer")
        )
        state = registry("state_mixer").get(c.state_mixer.name).build(c.state_mixer.options, bias=c.biases)
        mixed = apply_mixer(chosen.name, mixer, norm.build(c.norm.options, name="norm_seq")(h))
        h = h + mixed if c.residual else mixed
        if state is None:  # no state sublayer (the Mamba block)
            return h
        normed = norm.build(c.norm.options, name="norm_state")(h)
        with hk.experimental.name_scope("state_mixer"):
            return h + state(normed)


class SequenceModel(hk.Module):
    """The stack for a config; `__call__(*inputs)`: (xs [B, n, d], ys [B, n]) -> ŷ [B, n], or
    (tokens [B, T],) -> logits [B, T, V]."""

    def __init__(self, config: SequenceConfig):
        super().__init__(name=config.preset)
        self.config = config

    def __call__(self, *inputs, positions=None):
        c = self.config
        normal = hk.custom_creator(_normal_weights(c.init_std)) if c.init_std else contextlib.nullcontext()
        with DENSE_LAYOUTS[c.dense_layout](), ATTENTION_KERNELS[c.attention_kernel](), normal:
            return stack(c, *inputs, positions=positions)


def _normal_weights(std: float):
    """A Haiku creator drawing every parameter of 2 or more axes from N(0, std²) (module docstring)."""

    def create(next_creator, shape, dtype, init, context):
        return next_creator(shape, dtype, hk.initializers.RandomNormal(std) if len(shape) >= 2 else init)

    return create


def stack(c: SequenceConfig, *inputs, positions=None):
    """The read-in, position encoding, blocks, final norm and read-out of `c` (inside
    SequenceModel, whose name roots the parameters). `positions` [B, K] (token inputs only): the
    read-out at those positions alone, logits [B, K, V]."""
    if positions is not None and c.inputs != "tokens":
        raise ValueError("positions: a read-out at chosen positions is for token inputs only")
    read_in, read_out = tied_read() if c.tie_embeddings else READ[c.inputs]
    h = read_in(c, *inputs)  # [B, T, D]
    t = h.shape[1]
    position = c.encoding()
    limit = position.max_tokens()
    if limit is not None and t > limit:
        raise ValueError(
            f"{t} tokens exceed the learned position table ({limit} tokens, "
            f"model.max_tokens); a learned {'absolute' if position.name == 'learned' else position.name} "
            "encoding cannot index past it"
        )
    absolute = position.absolute(t, c.width)  # [T, D] or None
    if absolute is not None:
        h = h + absolute
    h = dropout(h, c.embed_dropout)
    for layer in range(c.n_layer):
        h = Block(c, position, layer, name=f"block_{layer}")(h)
    h = registry("norm").get(c.norm.name).build(c.norm.options, name="norm_final")(h)
    if c.read_out == "compress":
        h = decode_last(c, h)
    if positions is not None:
        h = jnp.take_along_axis(h, positions[..., None], axis=1)  # [B, K, D]
    return read_out(c, h)


def sincos(t: int, width: int) -> jax.Array:
    """[T, D] fixed positions: sin(p ω_i) in the first half, cos(p ω_i) in the second, ω_i =
    10000^(−i / (D/2 − 1)) (D even; an odd D's last column is zero)."""
    half = width // 2
    omega = 1.0 / (10000.0 ** (jnp.arange(half) / max(half - 1, 1)))
    angles = jnp.arange(t)[:, None] * omega[None, :]
    table = jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], axis=1)
    return jnp.pad(table, ((0, 0), (0, width - 2 * half)))


def decode_last(c: SequenceConfig, h: jax.Array) -> jax.Array:
    """MAD's compression read-out: h [B, T, D] -> [B, T, D], every position decoded from the
    last one's state h[:, −1] plus fixed sin-cos positions by (norm, Linear D, GELU) twice, then a
    norm (the read-out's Linear follows)."""
    norm = registry("norm").get(c.norm.name)
    x = h[:, -1:, :] + sincos(h.shape[1], c.width)[None]
    for i in range(2):
        x = norm.build(c.norm.options, name=f"decoder_norm_{i}")(x)
        x = jax.nn.gelu(hk.Linear(c.width, with_bias=c.biases, name=f"decoder_{i}")(x), approximate=False)
    return norm.build(c.norm.options, name="decoder_norm_out")(x)


def dense_on_rows(next_call, args, kwargs, context):
    """Haiku method interceptor: an hk.Linear given x [..., D_in] computes on its rows
    [N, D_in] and returns [..., D_out] (the `flat` dense layout)."""
    if isinstance(context.module, hk.Linear) and context.method_name == "__call__" and args[0].ndim > 2:
        x = args[0]
        rows = next_call(x.reshape(-1, x.shape[-1]), *args[1:], **kwargs)
        return rows.reshape(*x.shape[:-1], rows.shape[-1])
    return next_call(*args, **kwargs)


# dense_layout -> the context the stack runs in
DENSE_LAYOUTS: dict[str, Callable] = {
    "flat": lambda: hk.intercept_methods(dense_on_rows),
    "batched": contextlib.nullcontext,
}

READ: dict[str, tuple[Callable, Callable]] = {  # inputs -> (read-in, read-out)
    "pairs": (
        lambda c, xs, ys: hk.Linear(c.width, with_bias=c.biases, name="read_in")(interleave(xs, ys)),
        lambda c, h: hk.Linear(1, with_bias=c.biases, name="read_out")(h)[:, 0::2, 0],
    ),
    "tokens": (
        lambda c, tokens: hk.Embed(c.vocab_size, c.width, name="embed")(tokens),
        lambda c, h: hk.Linear(c.vocab_size, with_bias=False, name="unembed")(h),
    ),
}


def tied_read() -> tuple[Callable, Callable]:
    """Token inputs' (read-in, read-out) sharing one table [V, D] (Zoology's tied lm_head): the
    embedding, and logits h Eᵀ."""
    holder = {}

    def read_in(c, tokens):
        holder["embed"] = hk.Embed(c.vocab_size, c.width, w_init=hk.initializers.RandomNormal(0.02), name="embed")
        return holder["embed"](tokens)

    return read_in, lambda c, h: h @ holder["embed"].embeddings.T


class Model(NamedTuple):
    """Pure functions: init(key, *inputs) -> (params, state); apply(params, state, *inputs,
    positions=None, rng=None) -> out, `rng` the key of the dropout masks (training; None: no
    dropout, as at evaluation)."""

    config: Any
    init: Callable
    apply: Callable


@registry("family").register(
    "sequence",
    SequenceConfig,
    doc="pre-norm blocks of a sequence mixer and a state mixer, every part "
    "from the settings (presets gpt2, lstm, lm, llama, mamba)",
)
def build_sequence(config: SequenceConfig) -> Model:
    transformed = hk.transform_with_state(
        lambda *inputs, positions=None: SequenceModel(config)(*inputs, positions=positions)
    )

    def apply(params, state, *inputs, positions=None, rng=None):
        return transformed.apply(params, state, rng, *inputs, positions=positions)[0]

    return Model(config, transformed.init, apply)


# params.npz of runs made before the one family: (old pattern, new) per path segment
LEGACY_NAMES = [
    (r"^model/", ""),
    (r"/~(_stack|tokens|pairs)(?=/|$)", ""),
    (r"/ln_mixer(?=/|$)", "/norm_seq"),
    (r"/mixer(?=/|$)", "/seq_mixer"),
    (r"/ln_mlp(?=/|$)", "/norm_state"),
    (r"/mlp_in(?=/|$)", "/state_mixer/up"),
    (r"/mlp_out(?=/|$)", "/state_mixer/down"),
    (r"/ln_final(?=/|$)", "/norm_final"),
    (r"/state_mixer/norm_state(?=/|$)", "/norm_state"),
]


def canonical_param_name(key: str) -> str:
    """A params.npz key of any version as this family names it (`module/.../name`)."""
    for pattern, new in LEGACY_NAMES:
        key = re.sub(pattern, new, key)
    return key


def parameter_count(params) -> int:
    return int(sum(jnp.size(p) for p in jax.tree_util.tree_leaves(params)))
