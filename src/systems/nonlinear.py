"""System `nonlinear`: von Oswald et al., "Transformers learn in-context by gradient descent"
(ICML 2023), the non-linear regression experiment — a transformer with an MLP block before its
linear self-attention layer, trained on in-context sine (or random-MLP) regression, and the
mechanism the paper says it learns made explicit: learned features of x with one GD step on
them (`features_gd`). Both are trained the same way, so a study compares them run for run.

Loss: the paper's ½ mean (ŷ − y_q)². Training draws fresh tasks every step from
fold_in(train_key, step) and takes an Adam step (global-norm clipping), whole log intervals in
one lax.scan; the eval set is drawn from `train.eval_seed`, which the training seed does not
change, so every seed and both models are scored on the same tasks.
Shapes: B batch, N pairs, d input dim.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import jax
import numpy as np

from src.bounds import check_memory, check_sizes, training_bytes
from src.loop import LoopResult, gradient_chunk
from src.gd_paper.metrics import loss
from src.optim import Optimizer, make_optimizer
from src.params import flatten_params
from src.registry import Choice, registry
from src.settings import Settings, SettingsError, choice_field
from src.train_settings import StepTrain
from src.systems import GradientTrainer, register_system


@dataclass(frozen=True)
class NonlinearTrain(StepTrain):
    """The reference notebook's training; the shared fields and their check: src.train_settings.StepTrain."""

    steps: int = 20_000  # the reference notebook's
    batch_size: int = 2048
    grad_clip: float = 100.0  # the notebook's grad_clip_value
    eval_size: int = 10_000
    log_every: int = 500
    checkpoint_every: int = 0
    adam_b1: float = 0.9
    adam_b2: float = 0.98
    warmup_fraction: float | None = None  # linear warm-up then cosine decay to 0; None: constant (the notebook's)


@dataclass(frozen=True)
class NonlinearSettings(Settings):
    system: ClassVar[str] = "nonlinear"
    required_keys: ClassVar[tuple] = ("task", "model", "train")
    task: Choice = choice_field("task", "sine_regression")
    model: Choice = choice_field("nonlinear_model", "mlp_lsa")
    train: NonlinearTrain = field(default_factory=NonlinearTrain)

    def describe(self) -> str:
        return f"{self.model.name} on {self.task.name}"

    def check(self) -> None:
        t, tr = self.task, self.train
        if not hasattr(t.options, "function"):
            accepted = [e.name for e in registry("task") if hasattr(e.options, "function")]
            raise SettingsError(f"task.name={t.name!r} is not accepted here; accepted: {', '.join(accepted)}")
        try:
            check_sizes(
                ("points", "task.options.num_context", t.options.num_context),
                ("d", "task.options.d", t.options.d),
                ("width", "model.options.width", self.model.options.width),
            )
            m = self.model.options
            check_memory(
                training_bytes(
                    batch_size=tr.batch_size,
                    eval_size=tr.eval_size,
                    tokens=t.options.num_context + 1,
                    width=m.width * (1 + m.widening),
                    layers=2,
                    heads=1,
                    keep_attention=False,
                ),
                "this run",
            )
        except ValueError as err:
            raise SettingsError(str(err)) from None


def make_eval_tasks(settings: NonlinearSettings, alpha: float = 1.0):
    """The fixed eval tasks (a PairPrompt of train.eval_size, the query last) from train.eval_seed."""
    sample = registry("task").get(settings.task.name).build(settings.task.options)
    return sample(jax.random.key(settings.train.eval_seed), settings.train.eval_size, alpha)


def build_feature_model(settings: NonlinearSettings):
    return registry("nonlinear_model").get(settings.model.name).build(settings.model.options)


class NonlinearTrainer(GradientTrainer):
    def __init__(self, settings: NonlinearSettings):
        self.settings = settings
        tr = settings.train
        self.steps, self.log_every, self.checkpoint_every = tr.steps, tr.log_every, tr.checkpoint_every
        self.model = build_feature_model(settings)
        self.sample = registry("task").get(settings.task.name).build(settings.task.options)
        self.optimizer = make_optimizer(
            Optimizer(
                "adam",
                tr.learning_rate,
                b1=tr.adam_b1,
                b2=tr.adam_b2,
                grad_clip=tr.grad_clip,
                warmup_fraction=tr.warmup_fraction,
            ),
            tr.steps,
        )
        self.key_init, self.train_key = jax.random.split(jax.random.key(tr.seed))
        self.seed_input = self.train_key  # seeds trained together differ in their train key
        self._eval_tasks = None
        self._eval = jax.jit(lambda params, tasks: loss(self.model.apply(params, tasks), tasks.query_y))

    @property
    def eval_tasks(self):
        if self._eval_tasks is None:
            self._eval_tasks = make_eval_tasks(self.settings)
        return self._eval_tasks

    @property
    def zero_loss(self) -> float:
        """The loss of predicting 0 on the eval tasks."""
        return float(0.5 * np.mean(np.square(np.asarray(self.eval_tasks.query_y))))

    def make_chunk(self):
        model, sample = self.model, self.sample
        batch_size = self.settings.train.batch_size

        def loss_fn(params, tasks):
            return loss(model.apply(params, tasks), tasks.query_y)

        return gradient_chunk(
            loss_fn,
            self.optimizer,
            lambda train_key, step: ((sample(jax.random.fold_in(train_key, step), batch_size),), {}),
        )

    def initial_params(self):
        return self.model.init(self.key_init, self.sample(jax.random.key(0), 1))

    def evaluate(self, state) -> dict[str, float]:
        return {"eval_loss": float(self._eval(state.params, self.eval_tasks))}

    def headline(self, row: dict) -> dict[str, str]:
        return {"eval_loss": f"{row['eval_loss']:.5f}"}

    def params_arrays(self, result: LoopResult) -> dict:
        return flatten_params(result.state.params)

    def summary(self, result: LoopResult) -> dict:
        s = self.settings
        return {
            "model": s.model.name,
            "task": s.task.name,
            "seed": s.train.seed,
            "steps": result.step,
            "steps_requested": s.train.steps,
            "train_loss": result.history[-1]["train_loss"] if result.history else None,
            "eval_loss": result.final.get("eval_loss"),
            "zero_loss": self.zero_loss,
            "train_seconds": round(result.seconds, 3),
            "eval_size": s.train.eval_size,
        }

    def report(self, result: LoopResult, run) -> str:
        return (
            f"{self.settings.describe()}: {result.step} steps in {result.seconds:.1f}s | "
            f"eval_loss {result.final['eval_loss']:.5f} (predicting 0: {self.zero_loss:.5f})"
        )


@register_system(
    NonlinearSettings,
    doc="von Oswald et al.: an MLP block + linear self-attention on "
    "non-linear (sine) regression vs GD on learned features",
)
def build_nonlinear(settings: NonlinearSettings) -> NonlinearTrainer:
    return NonlinearTrainer(settings)
