"""The attention-only transformer of von Oswald et al. and its Haiku wrapper (SPEC §3);
registry "family" entry `attention_only`.

One residual attention layer per step, no MLP, no layer norm:
    h_t <- clip(h_t + Attention(h_t, context tokens))
Either one weight-shared layer applied K times (`recurrent`), or K separate
layers. The prediction is read off the query token: ŷ = -h_query[last channel].

Only the query token's output is ever read, so the last layer is evaluated for
the query token alone (the earlier layers must update every token, because
their outputs are the next layer's keys and values).

Glossary of shapes: B batch, T tokens, S = T-1 context tokens, D width,
H heads, L layers.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import haiku as hk
import jax
import jax.numpy as jnp

from src.gd_paper.config import ModelConfig, TaskConfig
from src.gd_paper.models.layouts import make_tokens, model_width, num_context_tokens
from src.gd_paper.models.lsa import Attention
from src.registry import registry
from src.tasks.pairs import PairPrompt
from src.tasks.regression import empty_tasks


class ModelOutput(NamedTuple):
    prediction: jax.Array  # [B], ŷ for the query
    layer_predictions: jax.Array | None  # [L, B], ŷ read after each layer
    attention: tuple[jax.Array, ...] | None  # per layer [B, H, Tq, S]; Tq = T except last layer (1)
    layer_outputs: tuple[jax.Array, ...] | None  # per layer residual stream [B, T, D] (last: [B, 1, D])


def layer_name(model: ModelConfig, layer: int) -> str:
    return "layer_shared" if model.shared_weights else f"layer_{layer}"


class Transformer(hk.Module):
    def __init__(self, task: TaskConfig, model: ModelConfig, name: str = "transformer"):
        super().__init__(name=name)
        self.task = task
        self.model = model
        self.width = model_width(task, model)
        self.key_size = model.key_size or self.width
        self.num_context = num_context_tokens(task, model)

    @hk.transparent
    def _layer(self, index: int) -> Attention:
        m = self.model
        return Attention(
            num_heads=m.num_heads,
            key_size=self.key_size,
            model_size=self.width,
            scoring=m.layer_mixer(index),
            w_init=hk.initializers.VarianceScaling(m.init_scale),
            name=layer_name(m, index),
        )

    def __call__(
        self,
        tokens: jax.Array,
        *,
        return_attention: bool = False,
        return_layer_predictions: bool = False,
        return_layer_outputs: bool = False,
    ) -> ModelOutput:
        """tokens [B, T, D] -> ModelOutput."""
        m = self.model
        shared_layer = self._layer(0) if m.shared_weights else None
        h = tokens
        attention, layer_preds, layer_outputs = [], [], []
        for index in range(m.num_layers):
            layer = shared_layer if m.shared_weights else self._layer(index)
            last = index == m.num_layers - 1
            queries = h[:, -1:, :] if last else h  # [B, Tq, D]
            context = h[:, : self.num_context, :]  # [B, S, D]
            update, weights = layer(queries, context, return_weights=True)
            h = queries + update
            if m.clip_value > 0:
                h = jnp.clip(h, -m.clip_value, m.clip_value)
            attention.append(weights)
            layer_outputs.append(h)
            layer_preds.append(-h[:, -1, -1])
        return ModelOutput(
            prediction=-h[:, -1, -1],
            layer_predictions=jnp.stack(layer_preds) if return_layer_predictions else None,
            attention=tuple(attention) if return_attention else None,
            layer_outputs=tuple(layer_outputs) if return_layer_outputs else None,
        )


class Model(NamedTuple):
    """Pure functions of a Haiku-transformed transformer.

    init(key) -> params; apply(params, tokens, **flags) -> ModelOutput;
    predict(params, tasks) -> ŷ [B] (builds the tokens from raw tasks, so it
    can be differentiated with respect to the task's inputs).
    """

    task: TaskConfig
    config: ModelConfig
    init: Callable
    apply: Callable
    predict: Callable


@registry("family").register(
    "attention_only",
    doc="von Oswald et al.: attention layers only (no MLP, no norm), residual, read-out -h_query[last channel]",
)
def build_attention_only(options, task: TaskConfig, model: ModelConfig) -> Model:
    return _build(task, model)


def build_model(task: TaskConfig, model: ModelConfig) -> Model:
    """The model of `model.family` for `task` (a registry lookup)."""
    return registry("family").get(model.family).build(None, task, model)


def _build(task: TaskConfig, model: ModelConfig) -> Model:
    def forward(tokens, return_attention=False, return_layer_predictions=False, return_layer_outputs=False):
        return Transformer(task, model)(
            tokens,
            return_attention=return_attention,
            return_layer_predictions=return_layer_predictions,
            return_layer_outputs=return_layer_outputs,
        )

    transformed = hk.without_apply_rng(hk.transform(forward))
    example = make_tokens(empty_tasks(task), model)

    def init(key):
        return transformed.init(key, example)

    def apply(params, tokens, **flags):
        return transformed.apply(params, tokens, **flags)

    def predict(params, tasks: PairPrompt):
        return transformed.apply(params, make_tokens(tasks, model)).prediction

    return Model(task, model, init, apply, predict)
