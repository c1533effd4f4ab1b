"""The state mixers (registry "state_mixer"): the per-token network of a block,
x [B, T, D] -> [B, T, D]; `bias` says whether its Linear layers carry biases (GPT-2 yes, Llama no).

  mlp     W₂ GELU(W₁ x), hidden 4D
  glu     W₃ (σ(W₁ x) ⊙ W₂ x), hidden 4D (sigmoid-gated linear unit)
  swiglu  W₃ (swish(W₁ x) ⊙ W₂ x), hidden ⌊8D/3⌋ (about the parameters of the 4D MLP); Llama's,
          with `hidden_ratio` 4 as the length study's Llama sets its intermediate size (4D)
  none    no state sublayer at all (a Mamba block is norm, mixer, residual only): the builder
          returns None and the block skips the sublayer and its norm
  identity  the normed stream itself, so the sublayer is h += norm(h): Zoology's figure-2 block
          (state mixer torch.nn.Identity after its norm2, whose output the next layer, or the
          final norm, adds to the residual stream; zoology/model.py TransformerBlock)

Glossary: B batch, T tokens, D width.
"""

from __future__ import annotations

from dataclasses import dataclass

import haiku as hk
import jax

from src.registry import NoOptions, registry
from src.settings import require_number

STATE_MIXERS = registry("state_mixer")


@dataclass(frozen=True)
class GatedOptions:
    hidden_ratio: float = 0.0  # hidden width / D; 0 = the unit's own (4 glu, ⌊8D/3⌋ swiglu)

    def check(self) -> None:
        require_number("hidden_ratio", self.hidden_ratio, 0.0, high=64.0)


def _mlp(bias: bool):
    def mix(x):
        width = x.shape[-1]
        return hk.Linear(width, with_bias=bias, name="down")(
            jax.nn.gelu(hk.Linear(4 * width, with_bias=bias, name="up")(x))
        )

    return mix


def _gated(activation, default_hidden, options: GatedOptions, bias: bool):
    def mix(x):
        width = x.shape[-1]
        hidden = round(options.hidden_ratio * width) if options.hidden_ratio else default_hidden(width)
        gate = activation(hk.Linear(hidden, with_bias=bias, name="gate")(x))
        return hk.Linear(width, with_bias=bias, name="down")(gate * hk.Linear(hidden, with_bias=bias, name="up")(x))

    return mix


STATE_MIXERS.register("mlp", NoOptions, doc="GELU MLP, hidden 4D")(lambda options, bias=True: _mlp(bias))
STATE_MIXERS.register("glu", GatedOptions, doc="sigmoid-gated linear unit, hidden 4D")(
    lambda options, bias=True: _gated(jax.nn.sigmoid, lambda d: 4 * d, options, bias)
)
STATE_MIXERS.register("swiglu", GatedOptions, doc="swish-gated linear unit, hidden 8D/3 (Llama: hidden_ratio 4)")(
    lambda options, bias=True: _gated(jax.nn.swish, lambda d: 8 * d // 3, options, bias)
)
STATE_MIXERS.register("none", NoOptions, doc="no state sublayer (the Mamba block)")(lambda options, bias=True: None)
STATE_MIXERS.register("identity", NoOptions, doc="h += norm(h): Zoology's torch.nn.Identity state mixer, no MLP")(
    lambda options, bias=True: lambda x: x
)
