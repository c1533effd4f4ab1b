"""The attention-only transformer and its Haiku wrapper (SPEC §3).

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
import numpy as np

from src.attn import Attention
from src.config import ModelConfig, TaskConfig, model_width
from src.data import make_tokens, num_context_tokens, Tasks


class ModelOutput(NamedTuple):
    prediction: jax.Array                  # [B], ŷ for the query
    layer_predictions: jax.Array | None    # [L, B], ŷ read after each layer
    attention: tuple[jax.Array, ...] | None  # per layer [B, H, Tq, S]; Tq = T except last layer (1)
    layer_outputs: tuple[jax.Array, ...] | None  # per layer residual stream [B, T, D] (last: [B, 1, D])


def layer_name(model: ModelConfig, layer: int) -> str:
    return "layer_shared" if model.recurrent else f"layer_{layer}"


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
        softmax = (index in m.softmax_layers) if not m.recurrent else (0 in m.softmax_layers)
        return Attention(num_heads=m.num_heads, key_size=self.key_size, model_size=self.width,
                         softmax=softmax, w_init=hk.initializers.VarianceScaling(m.init_scale),
                         name=layer_name(m, index))

    def __call__(self, tokens: jax.Array, *, return_attention: bool = False,
                 return_layer_predictions: bool = False,
                 return_layer_outputs: bool = False) -> ModelOutput:
        """tokens [B, T, D] -> ModelOutput."""
        m = self.model
        shared_layer = self._layer(0) if m.recurrent else None
        h = tokens
        attention, layer_preds, layer_outputs = [], [], []
        for index in range(m.num_layers):
            layer = shared_layer if m.recurrent else self._layer(index)
            last = index == m.num_layers - 1
            queries = h[:, -1:, :] if last else h          # [B, Tq, D]
            context = h[:, : self.num_context, :]          # [B, S, D]
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


def build_model(task: TaskConfig, model: ModelConfig) -> Model:
    def forward(tokens, return_attention=False, return_layer_predictions=False,
                return_layer_outputs=False):
        return Transformer(task, model)(
            tokens, return_attention=return_attention,
            return_layer_predictions=return_layer_predictions,
            return_layer_outputs=return_layer_outputs)

    transformed = hk.without_apply_rng(hk.transform(forward))
    example = make_tokens(_dummy_tasks(task), model)

    def init(key):
        return transformed.init(key, example)

    def apply(params, tokens, **flags):
        return transformed.apply(params, tokens, **flags)

    def predict(params, tasks: Tasks):
        return transformed.apply(params, make_tokens(tasks, model)).prediction

    return Model(task, model, init, apply, predict)


def _dummy_tasks(task: TaskConfig) -> Tasks:
    n, d = task.num_context, task.d
    z = jnp.zeros
    return Tasks(z((1, n, d)), z((1, n)), z((1, d)), z((1,)), z((1, d)))


# ---------------------------------------------------------------------------
# Flat parameter trees: "module/param" -> array (the params.npz format).

def flatten_params(params) -> dict[str, np.ndarray]:
    return {f"{module}/{name}": np.asarray(value)
            for module, group in params.items() for name, value in group.items()}


def unflatten_params(flat: dict[str, np.ndarray]):
    params: dict[str, dict[str, jax.Array]] = {}
    for key, value in flat.items():
        module, name = key.rsplit("/", 1)
        params.setdefault(module, {})[name] = jnp.asarray(value)
    return params
