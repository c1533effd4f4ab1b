"""The parts of the paper's system's settings (von Oswald et al.): the in-context regression
task, the attention-only model in registry terms, training, and the curricula of context pairs.
The tree that holds them, its validation and its schema history are the system's
(src/systems/lsa.py); the named presets (lsa1, lsa_rec, twolayer) are in src/gd_paper/presets.py.

Glossary: d = input dimension, N = context pairs per task, B = batch (tasks),
K = number of attention layers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from src.registry import Choice
from src.settings import added_field, choice_field, require_int, require_number
from src.train_settings import StepTrain

ORDERINGS = ("random", "smallnorm2largenorm", "easy2hard", "hard2easy")
NOISE_MODES = ("clean", "label_noise", "random_pairs")
PLACEMENTS = ("mixed", "clean_first", "noisy_first")

# GD's step size is tuned on a second held-out set drawn from eval_seed + 1 (src/gd_paper/eval_set.py).


@dataclass(frozen=True)
class TaskConfig:
    """The in-context linear regression task (SPEC §1)."""

    objective: ClassVar[str] = "query_half_mse"  # registry "objective": the paper's loss
    name: str = "uniform_regression"  # registry "task"
    d: int = 10  # input dimension
    num_context: int = 10  # N, context pairs per task
    input_range: float = 1.0  # a: x ~ U(-a/2, a/2)^d
    weight_scale: float = 1.0  # w ~ N(0, weight_scale^2 I_d)

    def check(self) -> None:
        require_int("d", self.d, 1)
        require_int("num_context", self.num_context, 1)
        require_number("input_range", self.input_range, 0, open_low=True)
        require_number("weight_scale", self.weight_scale, 0, open_low=True)


@dataclass(frozen=True)
class ModelConfig:
    """An attention-only transformer (SPEC §3), in registry terms."""

    name: str = "lsa1"  # the preset it was made from (a label for tables)
    family: str = "attention_only"  # registry "family": how the pieces are assembled
    layout: Choice = choice_field("layout", "concat")  # registry "layout"
    mixers: tuple[str, ...] = ("linear",)  # registry "scoring", one per layer (one if shared)
    shared_weights: bool = True  # one weight-shared layer applied num_layers times
    num_layers: int = 1  # K
    num_heads: int = 1
    key_size: int = 0  # 0 means "the model width"
    init_scale: float = 0.002  # VarianceScaling scale (already divided by K)
    clip_value: float = 0.0  # clip activations to [-c, c] after each layer; 0 = off

    def layer_mixer(self, layer: int) -> str:
        """The scoring of layer `layer` (the shared layer's, for every layer, when shared)."""
        return self.mixers[0 if self.shared_weights else layer]


@dataclass(frozen=True)
class CurriculumConfig:
    """Noise, then ordering, then placement of context pairs (SPEC §7)."""

    ordering: str = "random"
    noise_mode: str = "clean"
    noise_p: float = 0.0  # fraction of pairs corrupted: exactly round(p*N)
    noise_sigma: float = 1.0  # label-noise std, or std of a random pair's label
    noise_placement: str = "mixed"


@dataclass(frozen=True)
class TrainConfig(StepTrain):
    """Optimisation and logging (SPEC §4); the shared fields and their check: src.train_settings.StepTrain."""

    steps: int = 5000
    batch_size: int = 2048
    eval_size: int = 10_000
    adam_b1: float = 0.9
    # 0.98 is the reference code's value (its config sets b2 = 0.98 for every model).
    # SPEC §4 writes 0.999; with 0.999 the twolayer copy model never learns to copy
    # (stalls at loss ≈ 0.389, see README "Adam β2"), with 0.98 it reaches GD. lsa1 and
    # lsa_rec give the same results with either value.
    adam_b2: float = 0.98
    num_tasks: int = added_field(0)  # a pool of task vectors (src/tasks/pools.py); 0: fresh
    num_training_examples: int = added_field(0)  # a pool of whole prompts; 0: fresh
