"""Normalisation layers (registry "norm"): x [..., D] -> [..., D], normalised over the last axis.

  layer_norm  (x − mean) / sqrt(var + ε) · scale + offset (GPT-2)
  rms_norm    x / sqrt(mean x² + ε) · scale (Llama, the Zoology recipe)
  none        x unchanged (Garg et al.'s LSTM stack has no norm)

Each builder returns a Haiku module factory `(name) -> module`.
"""

from __future__ import annotations

from dataclasses import dataclass

import haiku as hk

from src.registry import NoOptions, registry
from src.settings import require_number

NORMS = registry("norm")


@dataclass(frozen=True)
class NormOptions:
    eps: float = 1e-5

    def check(self) -> None:
        require_number("eps", self.eps, 0.0, open_low=True, high=1.0)


@NORMS.register("layer_norm", NormOptions, doc="layer norm with scale and offset (GPT-2)")
def build_layer_norm(options: NormOptions, name: str | None = None):
    return hk.LayerNorm(-1, create_scale=True, create_offset=True, eps=options.eps, name=name)


@NORMS.register("rms_norm", NormOptions, doc="root-mean-square norm with scale (Llama, Zoology)")
def build_rms_norm(options: NormOptions, name: str | None = None):
    return hk.RMSNorm(-1, eps=options.eps, name=name)


@NORMS.register("none", NoOptions, doc="no normalisation: x unchanged (the lstm preset)")
def build_no_norm(options: NoOptions, name: str | None = None):
    return lambda x: x
