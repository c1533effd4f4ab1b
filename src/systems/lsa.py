"""System `lsa`: von Oswald et al., "Transformers learn in-context by gradient descent" (ICML
2023) — attention-only transformers (linear or softmax scoring) on in-context linear regression,
scored against one tuned step of gradient descent on a fixed eval set, with the ordering and
noise curricula of context pairs (SPEC §1–§7).

Loss: the paper's ½ mean (ŷ − y_q)². Training draws fresh tasks every step from
fold_in(train_key, step) (or from a finite pool of task vectors or prompts, train.num_tasks /
train.num_training_examples, src/tasks/pools.py), applies the train curriculum (skipped when it cannot change the
distribution), builds the tokens and takes an Adam step, whole log intervals in one lax.scan.

Files (besides config, metrics, summary, params, checkpoint): ordering_idx.npy, noise_mask.npy
(and their copies under analysis/), analysis/analysis_metadata.json, and with `save_attention`
attn/layer{L}_head{H}.npy [tasks, queries, keys] and attn/attention.npz.
Shapes: B batch, N pairs, d input dim, T tokens, D width.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

import jax

from src.bounds import check_memory, check_sizes, training_bytes
from src.gd_paper.config import (
    NOISE_MODES,
    ORDERINGS,
    PLACEMENTS,
    CurriculumConfig,
    ModelConfig,
    TaskConfig,
    TrainConfig,
)
from src.gd_paper.curricula import apply_curriculum, is_exchangeable, num_corrupted
from src.gd_paper.eval_set import make_eval_set, make_evaluator, task_sampler
from src.loop import LoopResult, gradient_chunk
from src.optim import Optimizer, make_optimizer
from src.gd_paper.metrics import loss
from src.gd_paper.models.attention_only import build_model
from src.gd_paper.models.layouts import layout_of, make_tokens
from src.params import flatten_params
from src.registry import registry
import src.rundir.names as names
from src.settings import Settings, SettingsError, require, require_int, require_number, require_one_of
from src.systems import Arrays, GradientTrainer, register_system
from src.tasks.paper_form import is_paper_task, own_tasks, paper_tasks
from src.tasks.pools import check_pool, pooled_tasks

ATTENTION_TASKS = names.ATTENTION_TASKS


@dataclass(frozen=True)
class LSASettings(Settings):
    system: ClassVar[str] = "lsa"
    required_keys: ClassVar[tuple] = ("task", "model", "train", "train_curriculum", "eval_curriculum")
    legacy_keys: ClassVar[dict] = {"train.lr": "train.learning_rate", "train.grad_clip_norm": "train.grad_clip"}
    task: TaskConfig = field(default_factory=TaskConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    train_curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    eval_curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    save_attention: bool = False  # attn/ and the attention analyses (the runners' --save_attention)

    @classmethod
    def from_dict(cls, raw):
        if (
            isinstance(raw, dict)
            and raw.get("schema_version", 1) == 1
            and isinstance(raw.get("model"), dict)
            and "tokens" in raw["model"]
        ):
            raw = upgrade_v1(raw)
        return super().from_dict(raw)

    def describe(self) -> str:
        return self.model.name

    def check(self) -> None:
        t, m, tr = self.task, self.model, self.train
        tasks = paper_tasks()  # its own task and every pair task (src/tasks/paper_form.py)
        require(t.name in tasks, "task.name", t.name, ", ".join(tasks))
        own = is_paper_task(t)
        for name in ("input_range", "weight_scale"):  # the uniform task's own parameters
            require(
                own or getattr(t, name) == 1.0,
                f"task.{name}",
                getattr(t, name),
                f"1.0 for the pair task {t.name!r} (it draws with its own options; {name} is uniform_regression's)",
            )
        for kind, name, path in (
            ("family", m.family, "model.family"),
            *(("scoring", s, "model.mixers") for s in m.mixers),
        ):
            require(name in registry(kind), path, name, ", ".join(registry(kind).names()))
        require_int("model.num_layers", m.num_layers, 1)
        require(
            len(m.mixers) == (1 if m.shared_weights else m.num_layers),
            "model.mixers",
            list(m.mixers),
            f"one scoring per layer ({m.num_layers}), or exactly one when the weights are shared",
        )
        require_int("model.num_heads", m.num_heads, 1)
        require_int("model.key_size", m.key_size, 0)
        require_number("model.init_scale", m.init_scale, 0, open_low=True)
        require_number("model.clip_value", m.clip_value, 0)
        check_pool("train.", tr.num_tasks, tr.num_training_examples, t.name, pool_tasks=tuple(own_tasks()))
        try:  # the shared integer ranges (src/bounds.py): refuse absurd sizes before any work
            check_sizes(
                ("d", "task.d", t.d),
                ("points", "task.num_context", t.num_context),
                ("layers", "model.num_layers", m.num_layers),
                ("heads", "model.num_heads", m.num_heads),
            )
            if m.key_size:
                check_sizes(("width", "model.key_size", m.key_size))
            check_memory(run_bytes(self), "this run")
            # the task's own checks at this shape (k <= d, ...), traced without drawing anything
            jax.eval_shape(lambda key: task_sampler(t)(key, 1), jax.random.key(0))
        except ValueError as err:
            raise SettingsError(str(err)) from None
        for phase in ("train", "eval"):
            c = getattr(self, f"{phase}_curriculum")
            require_one_of(f"{phase}_curriculum.ordering", c.ordering, ORDERINGS)
            require_one_of(f"{phase}_curriculum.noise_mode", c.noise_mode, NOISE_MODES)
            require_one_of(f"{phase}_curriculum.noise_placement", c.noise_placement, PLACEMENTS)
            require_number(f"{phase}_curriculum.noise_p", c.noise_p, 0, high=1)
            require_number(f"{phase}_curriculum.noise_sigma", c.noise_sigma, 0)


def run_bytes(settings: LSASettings) -> int:
    """src.bounds' memory estimate for one run (tokens N + 1, width at most 2 (d + 1) plus the
    layout's positional part)."""
    t, m, tr = settings.task, settings.model, settings.train
    return training_bytes(
        batch_size=tr.batch_size,
        eval_size=tr.eval_size,
        tokens=t.num_context + 1,
        width=token_width(settings),
        layers=m.num_layers,
        heads=m.num_heads,
        keep_attention=settings.save_attention,
    )


def token_width(settings: LSASettings) -> int:
    """A token's width at most: 2 (d + 1) plus the layout's positional part and the key size."""
    m = settings.model
    return 2 * (settings.task.d + 1) + int(getattr(m.layout.options, "pe_size", 0) or 0) + m.key_size


def upgrade_v1(raw: dict[str, Any]) -> dict[str, Any]:
    """A schema-1 settings mapping (before the registries), meaning the same model: tokens ->
    layout (pe_size is the interleaved layout's option), softmax_layers -> one scoring per
    layer, recurrent -> shared_weights."""
    old = dict(raw["model"])
    softmax = set(old.pop("softmax_layers", ()))
    shared = old.pop("recurrent")
    layout, pe_size = old.pop("tokens"), old.pop("pe_size", 10)
    layers = 1 if shared else old["num_layers"]
    old["mixers"] = ["softmax" if i in softmax else "linear" for i in range(layers)]
    old["shared_weights"] = shared
    old["family"] = "attention_only"
    options = dataclasses.asdict(registry("layout").get(layout).options_from_dict({}))
    if "pe_size" in options:
        options["pe_size"] = pe_size
    old["layout"] = {"name": layout, "options": options}
    return {**raw, "model": old, "task": {"name": "uniform_regression", **raw["task"]}}


def init_and_train_keys(seed: int) -> tuple[jax.Array, jax.Array]:
    """(the key of the initial parameters, the key of the training data) of a run of `seed`."""
    key_init, train_key = jax.random.split(jax.random.key(seed))
    return key_init, train_key


class LSATrainer(GradientTrainer):
    def __init__(self, settings: LSASettings):
        self.settings = settings
        tr = settings.train
        self.steps, self.log_every, self.checkpoint_every = tr.steps, tr.log_every, tr.checkpoint_every
        self.model = build_model(settings.task, settings.model)
        self.optimizer = make_optimizer(
            Optimizer("adam", tr.learning_rate, b1=tr.adam_b1, b2=tr.adam_b2, grad_clip=tr.grad_clip), tr.steps
        )
        self.key_init, self.train_key = init_and_train_keys(tr.seed)
        self.seed_input = self.train_key  # seeds trained together differ in their train key
        self._eval_set = None
        self._evaluate = make_evaluator(self.model, settings)

    @property
    def eval_set(self):
        if self._eval_set is None:
            self._eval_set = make_eval_set(self.settings)
        return self._eval_set

    def initial_params(self):
        return self.model.init(self.key_init)

    def make_chunk(self):
        return make_train_chunk(self.settings, self.model, self.optimizer)

    def evaluate(self, state) -> dict[str, float]:
        return self._evaluate(state.params, self.eval_set)

    def headline(self, row: dict) -> dict[str, str]:
        return {"eval_loss": f"{row['eval_loss']:.4f}", "gd": f"{row['gd_loss']:.4f}"}

    def outputs_before(self) -> dict[str, Any]:
        e = self.eval_set
        return {
            names.ORDERING: e.ordering_idx,
            names.NOISE_MASK: e.noise_mask,
            f"{names.ANALYSIS}/{names.ORDERING}": e.ordering_idx,
            f"{names.ANALYSIS}/{names.NOISE_MASK}": e.noise_mask,
            names.METADATA: analysis_metadata(self.settings, e),
        }

    def params_arrays(self, result: LoopResult) -> dict:
        return flatten_params(result.state.params)

    def outputs(self, result: LoopResult) -> dict[str, Any]:
        if not self.settings.save_attention:
            return {}
        from src.probes.attention import capture_attention, per_head_arrays

        e = self.eval_set
        count = min(ATTENTION_TASKS, self.settings.train.eval_size)
        attention = capture_attention(self.model, result.state.params, e.tasks.first(count))
        files, raw = {}, Arrays()
        for (layer, head), weights in per_head_arrays(attention).items():
            files[names.attention_file(layer, head)] = weights
            raw[f"layer{layer}_head{head}"] = weights
        raw["noise_mask"], raw["ordering_idx"] = e.noise_mask[:count], e.ordering_idx[:count]
        return {**files, names.ATTN_RAW: raw}

    def summary(self, result: LoopResult) -> dict:
        s, final = self.settings, result.final
        record = {
            "model": s.model.name,
            "num_layers": s.model.num_layers,
            "seed": s.train.seed,
            "steps": result.step,
            "steps_requested": s.train.steps,
            "train_loss": result.history[-1]["train_loss"] if result.history else None,
            "gd_eta": self.eval_set.gd_eta,
            "train_seconds": round(result.seconds, 3),
            "eval_size": s.train.eval_size,
        }
        record.update({k: final.get(k) for k in SUMMARY_METRICS})
        record.update({k: v for k, v in final.items() if k not in SUMMARY_METRICS})
        return record

    def report(self, result: LoopResult, run) -> str:
        f = result.final
        line = (
            f"{self.settings.model.name}: {result.step} steps in {result.seconds:.1f}s | "
            f"eval_loss {f['eval_loss']:.4f} | gd_loss {f['gd_loss']:.4f} "
            f"(eta {self.eval_set.gd_eta:.3f}) | align_cos {f['align_cos']:.4f}"
        )
        if "copy_next" in f:
            line += (
                f" | copy own {f['copy_own']:.3f} next {f['copy_next']:.3f} "
                f"prev {f['copy_prev']:.3f} other {f['copy_other']:.3f}"
            )
        return line


SUMMARY_METRICS = ("eval_loss", "gd_loss", "align_cos", "l2_pred_diff", "model_diff")


def make_train_chunk(settings: LSASettings, model, optimizer):
    """The pure chunk (src.loop.gradient_chunk): chunk(params, opt_state, train_key, first_step,
    num_steps) -> (params, opt_state, losses [num_steps], {})."""
    task, tr, curriculum = settings.task, settings.train, settings.train_curriculum
    batch_size = tr.batch_size
    sample = pooled_tasks(task_sampler(task), tr.seed, tr.num_tasks, tr.num_training_examples)

    def loss_fn(params, tokens, targets):
        return loss(model.apply(params, tokens).prediction, targets)

    def draw(train_key, step):
        key_data, key_curriculum = jax.random.split(jax.random.fold_in(train_key, step))
        tasks = sample(key_data, batch_size)
        if not is_exchangeable(curriculum):  # a random shuffle of i.i.d. pairs changes nothing
            tasks = apply_curriculum(key_curriculum, tasks, curriculum, task).tasks
        return (make_tokens(tasks, model.config), tasks.query_y), {}

    return gradient_chunk(loss_fn, optimizer, draw)


def analysis_metadata(settings: LSASettings, eval_set) -> dict:
    n = settings.task.num_context

    def describe(c: CurriculumConfig) -> dict:
        corrupted = num_corrupted(c.noise_p, n) if c.noise_mode != "clean" else 0
        return {**c.__dict__, "num_corrupted": corrupted}

    return {
        "train_curriculum": describe(settings.train_curriculum),
        "eval_curriculum": describe(settings.eval_curriculum),
        "eval_size": settings.train.eval_size,
        "eval_seed": settings.train.eval_seed,
        "num_context": n,
        "tokens": settings.model.layout.name,
        "tokens_per_pair": layout_of(settings.model).tokens_per_pair,
        "gd_eta": eval_set.gd_eta,
        "ordering_idx": {
            "file": names.ORDERING,
            "shape": list(eval_set.ordering_idx.shape),
            "meaning": "position p of an eval task holds its original pair ordering_idx[p]",
        },
        "noise_mask": {
            "file": names.NOISE_MASK,
            "shape": list(eval_set.noise_mask.shape),
            "meaning": "True where the pair at that (new) position is corrupted",
            "corrupted_total": int(eval_set.noise_mask.sum()),
        },
        "attention_saved": settings.save_attention,
        "attention_tasks": min(ATTENTION_TASKS, settings.train.eval_size) if settings.save_attention else 0,
    }


@register_system(
    LSASettings, doc="von Oswald et al.: attention-only transformers on in-context regression vs one GD step"
)
def build_lsa(settings: LSASettings) -> LSATrainer:
    return LSATrainer(settings)
