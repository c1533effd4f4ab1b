"""The named models of the von Oswald reproduction, in registry terms (SPEC §3, §4).

  lsa1      concat layout, one linear-scoring LSA layer
  lsa_rec   concat layout, one weight-shared linear-scoring layer applied K times
  twolayer  interleaved layout with a concatenated sinusoidal position code of size 10
            (width 20), [softmax, linear] scoring, separate weights, key size 20

No block (no MLP, no norm): the attention-only family. `preset(name, num_layers)` gives
the reference settings of SPEC §4 (steps, lr, init, clipping); `preset_settings` the settings the
paper's runners make of their flags, for the runners (src/cli/lsa.py) and the studies alike.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

from src.gd_paper.config import CurriculumConfig, ModelConfig, TrainConfig
from src.overrides import apply_overrides
from src.registry import choice
from src.systems.lsa import LSASettings


@dataclass(frozen=True)
class Preset:
    model: Callable[[str, int], ModelConfig]  # (name, layers) -> model
    layers: int  # default depth
    steps: int  # the paper's training steps
    fixed_depth: bool  # only the default depth is accepted
    runner: str  # the runner CLI (python -m <runner>)
    layers_flag: bool  # that runner takes --num_layers
    deeper: str | None = None  # the preset its runner makes for other depths
    step_cost: float = 1.0  # rough cost of a step per layer (lsa1 = 1),
    # to start the longest runs of a sweep first

    def relative_cost(self, layers: int, steps: int) -> float:
        return self.step_cost * layers * steps


def _lsa_model(name: str, num_layers: int) -> ModelConfig:
    return ModelConfig(
        name=name,
        layout=choice("layout", "concat"),
        mixers=("linear",),
        shared_weights=True,
        num_layers=num_layers,
        num_heads=1,
        key_size=0,
        init_scale=0.002 / num_layers,
        clip_value=10.0 if num_layers > 2 else 0.0,
    )


def _twolayer_model(name: str, num_layers: int) -> ModelConfig:
    return ModelConfig(
        name=name,
        layout=choice("layout", "interleaved", pe_size=10),
        mixers=("softmax",) + ("linear",) * (num_layers - 1),
        shared_weights=False,
        num_layers=num_layers,
        num_heads=1,
        key_size=20,
        init_scale=0.02 / num_layers,
        clip_value=10.0 if num_layers > 2 else 0.0,
    )


CONCAT_RUNNER = "runners.run_concat_inputs_targets"
MODEL_PRESETS = {
    "lsa1": Preset(_lsa_model, 1, 5000, fixed_depth=True, runner=CONCAT_RUNNER, layers_flag=True, deeper="lsa_rec"),
    "lsa_rec": Preset(_lsa_model, 3, 5000, fixed_depth=False, runner=CONCAT_RUNNER, layers_flag=True, step_cost=2.0),
    "twolayer": Preset(
        _twolayer_model,
        2,
        10_000,
        fixed_depth=True,
        runner="runners.run_softmax_copy",
        layers_flag=False,
        step_cost=7.5,
    ),
}


def reference_lr(num_layers: int) -> float:
    """SPEC §4: lr 1e-3, or 5e-4 when depth > 3."""
    return 5e-4 if num_layers > 3 else 1e-3


def preset(name: str, num_layers: int | None = None, **train_overrides: Any) -> LSASettings:
    """The reference settings of a named model; `num_layers` only where the depth is free."""
    if name not in MODEL_PRESETS:
        raise ValueError(f"model={name!r} is unknown; accepted: {', '.join(MODEL_PRESETS)}")
    spec = MODEL_PRESETS[name]
    layers = spec.layers if num_layers is None else num_layers
    if spec.fixed_depth and layers != spec.layers:
        free = [n for n, p in MODEL_PRESETS.items() if not p.fixed_depth]
        raise ValueError(
            f"num_layers={layers} is fixed at {spec.layers} for model {name!r}; "
            f"use model {', '.join(map(repr, free))} for other depths"
        )
    if layers < 1:
        raise ValueError(f"num_layers={layers} must be >= 1")
    train = replace(TrainConfig(steps=spec.steps, learning_rate=reference_lr(layers)), **train_overrides)
    return LSASettings(model=spec.model(name, layers), train=train).validate()


# the names earlier versions gave two training settings, accepted by `--set` (train.lr=...)
SET_ALIASES = {"train.lr": "train.learning_rate", "train.grad_clip_norm": "train.grad_clip"}


def preset_settings(
    model_name: str,
    *,
    num_layers: int | None = None,
    seed: int = 0,
    steps: int | None = None,
    learning_rate: float | None = None,
    train_curriculum: CurriculumConfig = CurriculumConfig(),
    eval_curriculum: CurriculumConfig = CurriculumConfig(),
    save_attention: bool = False,
    sets: Sequence[str] = (),
    validate: bool = True,
    **train,
) -> LSASettings:
    """A named model's settings as the paper's runners make them: the preset (lsa1 with K > 1
    layers is lsa_rec), the training values given (None: the preset's), the curricula, then the
    `sets` overrides (`path=value`); validated unless `validate` is False. ValueError, one line."""
    spec = MODEL_PRESETS[model_name]
    if num_layers and num_layers != spec.layers and spec.deeper:
        model_name = spec.deeper
    base = preset(model_name, None if MODEL_PRESETS[model_name].fixed_depth else num_layers)
    given = {k: v for k, v in train.items() if v is not None}
    train_cfg = replace(
        base.train,
        seed=seed,
        steps=steps or base.train.steps,
        learning_rate=learning_rate or base.train.learning_rate,
        **given,
    )
    settings = replace(
        base,
        train=train_cfg,
        train_curriculum=train_curriculum,
        eval_curriculum=eval_curriculum,
        save_attention=save_attention,
    )
    settings = apply_overrides(settings, sets, SET_ALIASES)
    return settings.validate() if validate else settings
