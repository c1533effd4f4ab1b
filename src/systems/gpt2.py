"""System `gpt2`: Garg et al. (2022)'s in-context learner — a GPT-2 sequence model (any sequence
mixer, any position encoding) trained on regression or boolean tasks with a curriculum over
dimensions and points. The mechanisms study ("Not All Attention Is Created Equal") and
the length study (Lin et al., AAAI 2025) run on it.

Loss: mean squared error over every scored prediction point (Garg's training loss; twice the
paper system's ½·MSE — this system's `loss` means plain MSE). Reported error: the task
objective's per-point error (squared error / d for regression, 0/1 error of sign ŷ for boolean
tasks) on a fixed eval set (eval_seed) at the curriculum's end. Adam with gradient clipping.

Training-time pair curricula (`train_curriculum`, the paper system's SPEC §7 settings): noise, then
ordering, then placement of the context pairs before the last point of every training prompt
(with a fixed number of points); corrupted pairs stay in the context but leave the loss (their
labels are not targets). Clean pairs in random order leave a batch's distribution unchanged, so the
default draws nothing more: its runs are bit-identical to those made before this setting existed.

Files: training_log.csv (step, loss, n_points, n_dims: the original's), plus what the analyses
write (analysis/icl_curve.*, analysis/robustness.json, <mixer>_loss.png). Shapes: B batch, n points, d dims.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import jax
import jax.numpy as jnp
import optax

from src.batched import in_blocks
from src.gd_paper.config import CurriculumConfig
from src.gd_paper.curricula import is_exchangeable, with_pair_curriculum
from src.loop import LoopResult, gradient_chunk
from src.optim import Optimizer, make_optimizer
from src.models.sequence import SequenceConfig
from src.models.sequence_presets import gpt2
from src.params import flatten_params
from src.precision import PRECISIONS
from src.registry import Choice, registry
import src.rundir.names as names
from src.settings import Settings, added_field, choice_field
from src.train_settings import StepTrain
from src.systems import GradientTrainer, register_system
from src.systems.gpt2_checks import check_gpt2_settings
from src.systems.gpt2_prompts import eval_batch, eval_rows, sampler
from src.tasks.garg import Curriculum
from src.tasks.pairs import PairPrompt
from src.tasks.pools import pooled
from src.tasks.objectives import objective_of


@dataclass(frozen=True)
class GPT2Train(StepTrain):
    """Garg et al.'s training; the shared fields and their check: src.train_settings.StepTrain
    (checkpoint_every is the original's save_every_steps)."""

    steps: int = 6000
    log_every: int = 250
    keep_every: int = 0  # also keep checkpoint_<step>.npz (the original's keep_every_steps); 0 = no
    # the length study's loop (AdamW, warm-up then linear decay); the defaults are Garg et al.'s
    # constant-rate Adam
    warmup_fraction: float | None = None  # warm-up over this fraction of the steps, then linear decay to 0
    weight_decay: float = 0.0  # > 0: AdamW
    # how a step computes (none changes what is computed; the defaults are every recorded run's):
    precision: str = (
        "float32"  # float32 | tf32 (matrix passes in TF32 on GPUs) | bfloat16 (compute; float32 parameters and Adam)
    )
    flat_update: bool = False  # clipping and Adam on the parameters as one flat vector (fewer, larger kernels)
    num_tasks: int = added_field(0)  # a pool of task vectors (src/tasks/pools.py); 0: fresh
    num_training_examples: int = added_field(0)  # a pool of whole prompts; 0: fresh


@dataclass(frozen=True)
class GPT2Settings(Settings):
    system: ClassVar[str] = "gpt2"
    required_keys: ClassVar[tuple] = ("model", "task", "curriculum", "train")
    # records written before the flat dense layout became the default were trained batched
    absent_means: ClassVar[dict] = {"model.dense_layout": "batched"}
    legacy_keys: ClassVar[dict] = {
        "train.train_steps": "train.steps",
        "train.save_every_steps": "train.checkpoint_every",
        "train.keep_every_steps": "train.keep_every",
        "train.grad_clip_norm": "train.grad_clip",
    }
    model: SequenceConfig = field(default_factory=gpt2)  # the gpt2 preset of the one family
    task: Choice = choice_field("task", "linear_regression")
    curriculum: Curriculum = field(default_factory=Curriculum)
    train: GPT2Train = field(default_factory=GPT2Train)
    train_curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)  # pairs while training

    @classmethod
    def from_dict(cls, raw):
        model = raw.get("model") if isinstance(raw, dict) else None
        if isinstance(model, dict) and "n_embd" in model:  # a record of the GPT2Config era
            old = dict(model)
            base = gpt2().__dict__
            new = {
                "preset": "gpt2",
                "inputs": "pairs",
                "width": old.pop("n_embd"),
                "seq_mixer": old.pop("mixer"),
                "norm": {"name": base["norm"].name},
                "state_mixer": {"name": base["state_mixer"].name},
                "vocab_size": 0,
            }
            points = old.pop("n_positions", 11)
            new["max_tokens"] = 2 * points if isinstance(points, int) else points
            raw = {**raw, "model": {**old, **new}}
        return super().from_dict(raw)

    def describe(self) -> str:
        return f"{self.model.mixer_label()} + {self.model.position.name} on {self.task.name}"

    def loss_figure_file(self) -> str:
        return f"{self.model.mixer_label()}_loss.png"  # the original's {attention_type}_loss.jpg, as PNG

    def loss_figure_label(self) -> str:
        return "training loss: squared error, not / d"  # the eval figures' error is divided by d

    def loss_figure_marks(self) -> list[int]:
        """The curriculum's boundaries: the steps at which the dimension or the points grow."""
        c, steps = self.curriculum, self.train.steps
        return sorted(set(c.dims.changes(steps)) | set(c.points.changes(steps)))

    check = check_gpt2_settings  # the system's own rules: src/systems/gpt2_checks.py


def weighted_mse(prediction, batch: PairPrompt) -> jax.Array:
    return jnp.sum(batch.weights * (prediction - batch.ys) ** 2) / jnp.maximum(jnp.sum(batch.weights), 1)


def make_model(settings: GPT2Settings):
    return registry("family").get("sequence").build(settings.model)


def init_model(settings: GPT2Settings, model):
    """(params, Haiku state) of the settings' seed."""
    c = settings.curriculum
    example = sampler(settings)(jax.random.key(0), 1, c.dims.end, c.points.end)
    return model.init(jax.random.key(settings.train.seed), example.xs, example.ys)


def optimizer_of(settings: GPT2Settings) -> optax.GradientTransformation:
    tr = settings.train
    optimizer = make_optimizer(
        Optimizer(
            "adamw" if tr.weight_decay > 0 else "adam",
            tr.learning_rate,
            weight_decay=tr.weight_decay,
            grad_clip=tr.grad_clip,
            warmup_fraction=tr.warmup_fraction,
            decay="linear",
        ),
        tr.steps,
    )
    return (
        optax.flatten(optimizer) if tr.flat_update else optimizer
    )  # flat: the same update, its norm summed in another order


def train_key_of(settings: GPT2Settings) -> jax.Array:
    """The key every training batch is drawn from (folded with the step number)."""
    return jax.random.fold_in(jax.random.key(settings.train.seed), 1)


def make_chunk(settings: GPT2Settings, model, optimizer):
    """The pure chunk (src.loop.gradient_chunk): chunk(params, opt_state, (train_key, model_state),
    first_step, num_steps) -> (params, opt_state, losses, {n_points, n_dims}), each [num_steps]."""
    tr, c = settings.train, settings.curriculum
    sample = pooled(sampler(settings), tr.seed, tr.num_tasks, tr.num_training_examples)
    pairs = settings.train_curriculum
    forward = PRECISIONS[tr.precision](model.apply)

    def loss_fn(params, model_state, batch):
        return weighted_mse(forward(params, model_state, batch.xs, batch.ys), batch)

    def draw(seed_input, step):
        train_key, model_state = seed_input
        dims, points = c.dims.at(step), c.points.at(step)
        batch = sample(jax.random.fold_in(train_key, step), tr.batch_size, dims, points)
        if not is_exchangeable(pairs):  # the default draws nothing more (bit-identical runs)
            batch = with_pair_curriculum(jax.random.fold_in(jax.random.fold_in(train_key, step), 7), batch, pairs)
        return (model_state, batch), {"n_points": points, "n_dims": dims}

    return gradient_chunk(loss_fn, optimizer, draw)


class GPT2Trainer(GradientTrainer):
    def __init__(self, settings: GPT2Settings):
        self.settings = settings
        tr = settings.train
        self.steps, self.log_every = tr.steps, tr.log_every
        self.checkpoint_every, self.keep_every = tr.checkpoint_every, tr.keep_every
        self.model, self.optimizer = make_model(settings), optimizer_of(settings)
        self.params0, self.model_state = init_model(settings, self.model)
        self.train_key = train_key_of(settings)
        # seeds trained together differ in their train key and Haiku state (e.g. FAVOR+'s features)
        self.seed_input = (self.train_key, self.model_state)
        self._apply = jax.jit(self.model.apply)
        self._rows = eval_rows(settings)
        self.objective = objective_of(settings.task.name)
        self._evaluation = None

    @property
    def evaluation(self) -> PairPrompt:
        if self._evaluation is None:
            self._evaluation = eval_batch(self.settings)
        return self._evaluation

    def initial_params(self):
        return self.params0

    def make_chunk(self):
        return make_chunk(self.settings, self.model, self.optimizer)

    def evaluate(self, state) -> dict[str, float]:
        ev, params = self.evaluation, state.params
        prediction = in_blocks(lambda xs, ys: self._apply(params, self.model_state, xs, ys), self._rows)(ev.xs, ev.ys)
        errors = self.objective.mean_point_errors(prediction, ev)
        return {
            "eval_loss": float(weighted_mse(prediction, ev)),
            "eval_error_last": float(errors[-1]),
            "eval_error_mean": float(jnp.mean(errors)),
        }

    def headline(self, row: dict) -> dict[str, str]:
        return {"error_last": f"{row['eval_error_last']:.4f}"}

    def work_per_step(self) -> float:
        """Parameters x tokens of a step: every step reads batch_size prompts of the curriculum's
        last length (shorter prompts are masked, not cut)."""
        params = sum(int(leaf.size) for leaf in jax.tree_util.tree_leaves(self.params0))
        return float(params) * self.settings.train.batch_size * 2 * self.settings.curriculum.points.end

    def params_arrays(self, result: LoopResult) -> dict:
        return flatten_params(result.state.params)

    def outputs(self, result: LoopResult) -> dict:
        per_step = result.per_step
        rows = ["step,loss,n_points,n_dims"] + [
            f"{i + 1},{float(loss)!r},{int(points)},{int(dims)}"
            for i, (loss, points, dims) in enumerate(
                zip(per_step.get("loss", []), per_step.get("n_points", []), per_step.get("n_dims", []))
            )
        ]
        return {names.TRAINING_LOG: "\n".join(rows) + "\n"}

    def summary(self, result: LoopResult) -> dict:
        last = result.history[-1] if result.history else {}
        return {
            "model": self.settings.model.mixer_label(),
            "task": self.settings.task.name,
            "steps": result.step,
            "train_seconds": round(result.seconds, 3),
            **{k: v for k, v in last.items() if k != "step"},
            "error_metric": self.objective.describes,
        }

    def report(self, result: LoopResult, run) -> str:
        last = result.history[-1]["eval_error_last"] if result.history else float("nan")
        return (
            f"{self.settings.model.mixer_label()}: {result.step} steps in {result.seconds:.1f}s | "
            f"eval error at the last point {last:.4f}"
        )


@register_system(
    GPT2Settings,
    doc="Garg et al.'s GPT-2 on regression and boolean tasks with a curriculum (mechanisms and length studies)",
)
def build_gpt2(settings: GPT2Settings) -> GPT2Trainer:
    return GPT2Trainer(settings)
