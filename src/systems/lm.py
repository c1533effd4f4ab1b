"""System `lm`: the ICL benchmark of Zoology / miniseq (the ICL benchmark's recipe) — a language-model
stack of sequence mixers and state mixers trained on a registered task: token tasks (MQAR,
disjoint sets) or x/y-pair tasks (boolean classes, regression), scored by the task's objective
(src/tasks/objectives.py). AdamW with linear warm-up then cosine decay, gradient clipping.

A model with dropout (model.embed_dropout, softmax_causal's `dropout`; Zoology's block) draws its
masks in training only, from a key per step (src/systems/lm_batches.py dropout_key: the run's train
key and the step); evaluation draws none. A model without dropout draws no key: the program it
always was.

Files: examples.json (a few decoded eval sequences) and, in the summary, the objective's
number at every position (`accuracy_by_position` or `error_by_position`).
Glossary: B batch, T tokens, V vocabulary, n points, d dims.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import ClassVar

import jax
import numpy as np

from src.bounds import check_memory, check_sizes, training_bytes
from src.loop import LoopResult, gradient_chunk
from src.optim import Optimizer, make_optimizer
from src.models.mixers.kit import check_lengths
from src.models.sequence import SequenceConfig, parameter_count
from src.models.sequence_presets import lm, with_block
from src.params import flatten_params
from src.registry import Choice, registry
from src.settings import (
    EVAL_SEED,
    Settings,
    SettingsError,
    added_field,
    choice_field,
    require,
    require_int,
    require_one_of,
)
from src.train_settings import StepTrain
from src.systems import GradientTrainer, register_system
from src.systems.lm_batches import LOGITS, decoded_examples, dropout_key, evaluation_sampler, model_inputs
from src.systems.lm_batches import sampler, training_loss
from src.tasks.objectives import objective_of, tasks_for

EXAMPLES = "examples.json"


@dataclass(frozen=True)
class LMTrain(StepTrain):
    """The ICL benchmark's training; the shared fields and their check: src.train_settings.StepTrain."""

    steps: int = 1500
    learning_rate: float = 3e-3  # the ICL benchmark: 1e-3 at batch 256; we train at batch 64
    grad_clip: float = 3.0
    eval_size: int = 512
    eval_seed: int = EVAL_SEED + 1
    checkpoint_every: int = 500
    weight_decay: float = 0.1
    warmup_fraction: float | None = 0.03  # None: a constant rate (no warm-up, no decay)
    # the training loss's logits: only at the scored positions (`scored`: for tasks that score a
    # fixed number per sequence, MQAR's κ queries; the read-out [D, V] is most of the step at
    # V = 8,192) or at every position, masked (`all`: the records before 2026-11-26)
    logits: str = "scored"
    adam_b1: float = added_field(0.9)  # AdamW's moment decays (Edelman et al. train at 0.9, 0.95)
    adam_b2: float = added_field(0.999)


@dataclass(frozen=True)
class PairShape:
    """The x/y-pair tasks' sequence: n points of dimension d."""

    n_points: int = 40
    n_dims: int = 10


@dataclass(frozen=True)
class LMSettings(Settings):
    system: ClassVar[str] = "lm"
    required_keys: ClassVar[tuple] = ("task", "model", "train", "pairs")
    legacy_keys: ClassVar[dict] = {"train.train_steps": "train.steps"}
    # records written before the flat dense layout and the scored logits became the defaults
    absent_means: ClassVar[dict] = {"model.dense_layout": "batched", "train.logits": "all"}
    task: Choice = choice_field("task", "mqar", vocab_size=512)
    model: SequenceConfig = field(default_factory=lambda: lm(width=64, n_head=4, vocab_size=512))
    train: LMTrain = field(default_factory=LMTrain)
    pairs: PairShape = field(default_factory=PairShape)

    @classmethod
    def from_dict(cls, raw):
        model = dict(raw.get("model") or {}) if isinstance(raw, dict) else {}
        if "max_len" in model:  # a record of the LMConfig era (the ICL benchmark's names)
            mixer = model.get("seq_mixer")
            if isinstance(mixer, dict) and mixer.get("name") == "attention":
                model["seq_mixer"] = {**mixer, "name": "softmax_causal"}
            base = lm()
            model.update(
                preset="lm",
                max_tokens=model.pop("max_len"),
                position={"name": "learned", "options": {"truncated": True}},
                norm={"name": base.norm.name},
            )
            raw = {**raw, "model": model}
        return super().from_dict(raw)

    def describe(self) -> str:
        return f"{self.task.name} / {self.model.mixer_label()} / {self.model.state_mixer.name}"

    def check(self) -> None:
        _check_task_and_shape(self)
        tokens = _check_against_task(self)
        _check_sizes_and_memory(self, tokens)


def _check_task_and_shape(settings: LMSettings) -> None:
    """A token or pair task, and positive sizes with a width that splits into even heads."""
    m, pairs = settings.model, settings.pairs
    tasks = tasks_for("tokens", "pairs")
    require(settings.task.name in tasks, "task", settings.task.name, ", ".join(tasks))
    for path, value in (
        ("model.width", m.width),
        ("model.n_layer", m.n_layer),
        ("model.n_head", m.n_head),
        ("pairs.n_points", pairs.n_points),
        ("pairs.n_dims", pairs.n_dims),
    ):
        require_int(path, value, 1)
    require(
        m.width % m.n_head == 0 and (m.width // m.n_head) % 2 == 0,
        "model.width",
        m.width,
        f"an even multiple of model.n_head={m.n_head}",
    )


def _check_against_task(settings: LMSettings) -> int:
    """The logits, and the model's inputs, length, vocabulary and dimension against the task's;
    the number of tokens a sequence of the task holds."""
    m, pairs, task = settings.model, settings.pairs, settings.task
    require_one_of("train.logits", settings.train.logits, tuple(LOGITS))
    objective = objective_of(task.name)
    require(
        m.inputs == objective.inputs,
        "model.inputs",
        m.inputs,
        f"{objective.inputs!r}, what task {task.name!r} gives",
    )
    tokens = task.options.tokens() if objective.inputs == "tokens" else 2 * pairs.n_points
    require(m.max_tokens >= tokens, "model.max_tokens", m.max_tokens, f">= {tokens} tokens of the task")
    if objective.inputs == "tokens":
        wanted = getattr(task.options, "read_out", "next_token")
        require(m.read_out == wanted, "model.read_out", m.read_out, f"{wanted!r}, what task {task.name!r} reads")
        require(
            m.vocab_size == task.options.vocab_size,
            "model.vocab_size",
            m.vocab_size,
            f"the task's task.options.vocab_size={task.options.vocab_size}",
        )
    require(
        objective.inputs == "tokens" or m.n_dims == pairs.n_dims,
        "model.n_dims",
        m.n_dims,
        f"pairs.n_dims={pairs.n_dims}",
    )
    return tokens


def _check_sizes_and_memory(settings: LMSettings, tokens: int) -> None:
    """The shared integer ranges, the memory estimate and the task's own checks at this shape."""
    m, tr, pairs = settings.model, settings.train, settings.pairs
    try:
        check_sizes(
            ("width", "model.width", m.width),
            ("layers", "model.n_layer", m.n_layer),
            ("heads", "model.n_head", m.n_head),
            ("points", "pairs.n_points", pairs.n_points),
            ("d", "pairs.n_dims", pairs.n_dims),
        )
        check_memory(
            training_bytes(
                batch_size=tr.batch_size,
                eval_size=tr.eval_size,
                tokens=tokens,
                width=m.width,
                layers=m.n_layer,
                heads=m.n_head,
            ),
            "this run",
        )
        check_lengths(m, m.max_tokens)  # options that depend on the sequence
        # the task's own checks at this shape (k <= d, ...), traced without drawing anything
        jax.eval_shape(lambda key: sampler(settings)(key, 1), jax.random.key(0))
    except ValueError as err:
        raise SettingsError(str(err)) from None


def lm_settings_unchecked(
    task: Choice,
    seq_mixer: Choice,
    state_mixer: Choice,
    *,
    width: int,
    n_layer: int,
    n_head: int,
    train: LMTrain = LMTrain(),
    pairs: PairShape = PairShape(),
    dense_layout: str = "flat",
    seq_mixers: tuple[Choice, ...] = (),
    block: str = "ours",
) -> LMSettings:
    """The ICL benchmark recipe's settings, not yet validated: the model's input kind, length and
    vocabulary follow the task; `block` (src.models.sequence_presets.with_block): `ours`, or `zoology`
    (Zoology's TransformerBlock, which sets the norm, the state mixer, the positions, dropout, the
    attention's biases and the tied read-out in place of the arguments')."""
    inputs = objective_of(task.name).inputs
    length, vocab = (
        (task.options.tokens(), task.options.vocab_size) if inputs == "tokens" else (2 * pairs.n_points, 8192)
    )  # (the pair tasks read no vocabulary)
    model = lm(
        width=width,
        n_layer=n_layer,
        n_head=n_head,
        max_len=length,
        vocab_size=vocab,
        n_dims=pairs.n_dims,
        inputs=inputs,
        seq_mixer=seq_mixer,
        state_mixer=state_mixer,
    )
    read_out = getattr(task.options, "read_out", "next_token")  # MAD's compression decodes its last state
    model = with_block(replace(model, dense_layout=dense_layout, seq_mixers=seq_mixers, read_out=read_out), block)
    return LMSettings(task=task, model=model, train=train, pairs=pairs)


def lm_settings(task: Choice, seq_mixer: Choice, state_mixer: Choice, **shape) -> LMSettings:
    """lm_settings_unchecked's settings (the same arguments: width, n_layer, n_head, train, pairs,
    dense_layout, seq_mixers, block), validated (SettingsError, one line, in our dotted paths)."""
    return lm_settings_unchecked(task, seq_mixer, state_mixer, **shape).validate()


def make_model(settings: LMSettings):
    return registry("family").get("sequence").build(settings.model)


def init_model(settings: LMSettings, model, sample=None):
    """(params, Haiku state) of the settings' seed, shaped by one example of the task (`sample`:
    the settings' sampler unless given)."""
    example = (sample or sampler(settings))(jax.random.key(0), 1)
    return model.init(jax.random.key(settings.train.seed), *model_inputs(example))


class LMTrainer(GradientTrainer):
    def __init__(self, settings: LMSettings):
        self.settings = settings
        tr = settings.train
        self.steps, self.log_every, self.checkpoint_every = tr.steps, tr.log_every, tr.checkpoint_every
        self.model = make_model(settings)
        self.optimizer = make_optimizer(
            Optimizer(
                "adamw",
                tr.learning_rate,
                b1=tr.adam_b1,
                b2=tr.adam_b2,
                weight_decay=tr.weight_decay,
                grad_clip=tr.grad_clip,
                warmup_fraction=tr.warmup_fraction,
            ),
            tr.steps,
        )
        self.objective = objective_of(settings.task.name)
        self.sample = sampler(settings)
        self.sample_evaluation = evaluation_sampler(settings)
        self.params0, self.model_state = init_model(settings, self.model, self.sample)
        self.train_key = jax.random.fold_in(jax.random.key(tr.seed), 1)
        self.seed_input = self.train_key
        self._score = jax.jit(lambda p, b: self.objective.score(self.apply(p, *model_inputs(b)), b))
        extras = self.objective.extras
        self._extras = extras and jax.jit(lambda p, b: extras(self.apply(p, *model_inputs(b)), b))
        self._evaluation = None

    @property
    def evaluation(self):
        if self._evaluation is None:
            self._evaluation = jax.jit(lambda key: self.sample_evaluation(key, self.settings.train.eval_size))(
                jax.random.key(self.settings.train.eval_seed)
            )
        return self._evaluation

    def apply(self, params, *inputs, positions=None, rng=None):
        """The model's output; `rng`: a dropout key (training), None at evaluation (no dropout)."""
        return self.model.apply(params, self.model_state, *inputs, positions=positions, rng=rng)

    def make_chunk(self):
        """chunk(params, opt_state, train_key, first_step, num_steps) -> (params, opt_state, losses, {})."""
        sample, batch_size = self.sample, self.settings.train.batch_size
        loss_of = training_loss(self.settings, self.apply, self.objective)
        # a model without dropout draws no key: the same program as before dropout existed
        keys = (
            (lambda train_key, step: (dropout_key(train_key, step),))
            if self.settings.model.has_dropout()
            else (lambda train_key, step: ())
        )
        return gradient_chunk(
            loss_of,
            self.optimizer,
            lambda train_key, step: (
                (sample(jax.random.fold_in(train_key, step), batch_size), *keys(train_key, step)),
                {},
            ),
        )

    def initial_params(self):
        return self.params0

    def seed_parts(self):
        """None: seeds are not trained together (self.apply holds this seed's Haiku state)."""
        return None

    def scores(self, params) -> dict:
        """{loss, value (the objective's number over scored positions), by_position [P] (NaN where
        never scored)} on the eval set."""
        scored = self._score(params, self.evaluation)
        score, counted = np.asarray(scored.score, np.float64), np.asarray(scored.counted, np.float64)
        per_position = score.sum(0) / np.where(counted.sum(0) > 0, counted.sum(0), np.nan)
        return {
            "loss": float(scored.loss),
            "value": float(score.sum() / max(counted.sum(), 1.0)),
            "by_position": per_position,
        }

    def evaluate(self, state) -> dict[str, float]:
        result = self.scores(state.params)
        row = {"eval_loss": result["loss"], f"eval_{self.objective.metric}": result["value"]}
        if self._extras:  # the objective's further numbers (the Markov chains' distances)
            row.update({f"eval_{k}": float(v) for k, v in self._extras(state.params, self.evaluation).items()})
        return row

    def baseline_scores(self) -> dict[str, float]:
        """{baseline: the objective's number} on the eval set for the next-token estimators
        registered for this task (baselines/markov.py; empty for other tasks)."""
        from baselines.markov import NextTokenBaseline

        batch, out = self.evaluation, {}
        for entry in registry("baseline"):
            if entry.options is NextTokenBaseline and entry.is_applicable(self.settings.task.name):
                probs = entry.build(None)(batch.inputs, self.settings.model.vocab_size)
                scored = self.objective.score(jax.numpy.log(probs), batch)
                out[entry.name] = round(float(scored.score.sum() / max(float(scored.counted.sum()), 1.0)), 6)
        return out

    def headline(self, row: dict) -> dict[str, str]:
        key = f"eval_{self.objective.metric}"
        return {self.objective.metric: f"{row[key]:.4f}"}

    def params_arrays(self, result: LoopResult) -> dict:
        return flatten_params(result.state.params)

    def outputs(self, result: LoopResult) -> dict:
        return {EXAMPLES: decoded_examples(self.apply, result.state.params, self.evaluation)}

    def summary(self, result: LoopResult) -> dict:
        s, metric = self.settings, self.objective.metric
        last = result.history[-1] if result.history else {}
        by_position = self.scores(result.state.params)["by_position"] if result.history else np.array([])
        return {
            "task": s.task.name,
            "seq_mixer": s.model.mixer_label(),
            "state_mixer": s.model.state_mixer.name,
            "steps": result.step,
            "parameters": parameter_count(result.state.params),
            "train_seconds": round(result.seconds, 3),
            **{k: v for k, v in last.items() if k != "step"},
            f"{metric}_by_position": [None if not np.isfinite(a) else round(float(a), 6) for a in by_position],
            **({"baselines": baselines} if (baselines := self.baseline_scores()) else {}),
        }

    def report(self, result: LoopResult, run) -> str:
        s, f = self.settings, result.final
        return (
            f"{s.task.name} / {s.model.mixer_label()} / {s.model.state_mixer.name}: {result.step} "
            f"steps in {result.seconds:.1f}s | "
            + ", ".join(f"{k[5:]} {v:.4f}" for k, v in f.items() if k in ("eval_accuracy", "eval_error"))
        )


@register_system(
    LMSettings,
    doc="the Zoology / miniseq ICL benchmark: sequence x state mixers on "
    "token and pair tasks (the ICL benchmark's recipe)",
)
def build_lm(settings: LMSettings) -> LMTrainer:
    return LMTrainer(settings)
