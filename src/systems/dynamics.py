"""System `dynamics`: Zhang, Singh, Latham & Saxe, "Training dynamics of in-context learning in
linear attention" (ICML 2025) — linear-attention models (and the cubic-feature MLP) trained by
full-batch GD (or SGD, Adam) on a FIXED set of sequences, recording the loss at every epoch
and the key-query singular values at every log point.

Loss: mean squared error of the query prediction, L = (1/P) Σ_p (ŷ_p − y_p)² (the original's
nn.MSELoss; no ½). Every model is ŷ = F t(θ) (src/models/dynamics.py), so the full-batch loss
is the quadratic L(θ) = t G t − 2 bᵀ t + c of the set's moments G = FᵀF/P, b = Fᵀy/P,
c = yᵀy/P, computed once: an epoch costs O(F²) whatever P is. The loss and the test losses are
recorded at the parameters before each epoch's update (as the original code does). A step of the one loop is
an epoch here. With `softmax` (the original's --softmax, attention models only) the loss is no
quadratic of moments: each epoch computes it from the sequences themselves, the gradient by
jax.grad (src/models/dynamics_softmax.py), an O(P·T·H·D) pass (O(P·T²·H·D) with vary_len).

Files: dynamics.npz (loss and test losses at every epoch, log_epochs, singular values of every
head's W_KQ and the per-head principal-component diagonals at every log point; with softmax no
diagonals: they are the linear model's coefficients of h ⊗ x_q), plus the dynamics analysis and,
with `show`, the loss figure.
Shapes: P sequences, F features, E epochs, K log points, H heads, D input dimension.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass, field
from functools import partial
from typing import Callable, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from src.loop import Chunk, LoopResult, TrainState, scan_chunk
from src.models.dynamics_softmax import loss as softmax_loss
from src.optim import Optimizer, gradient_step, make_optimizer
from src.registry import Choice
import src.rundir.names as names
from src.settings import Settings, added_field, choice_field
from src.train_settings import TrainLoop
from src.systems import Arrays, SystemTrainer, register_system
from src.systems.dynamics_checks import OPTIMIZERS, check_dynamics_settings
from src.tasks.dynamics import DynamicsTaskConfig, SequenceSet, make_sets

# registered model -> the original's --model name (and its file names)
ORIGINAL_MODELS = {"attn_merged": "attnM", "attn_separate": "attnS", "cubic_mlp": "mlp"}
MOMENT_CHUNK = 4096  # sequences per chunk when accumulating the moments


@dataclass(frozen=True)
class DynamicsTrain(TrainLoop):
    """Full-batch (or minibatch SGD) training on fixed sets, counted in epochs; the shared fields
    and their check: src.train_settings.TrainLoop (log_every and checkpoint_every count epochs)."""

    scales: ClassVar[tuple[str, ...]] = ("learning_rate", "init")
    epochs: int = 6001
    optimizer: str = "gd"  # gd (full batch) | sgd (minibatches of batch_size) | adam (full batch)
    batch_size: int = 0  # 0 = full batch (gd, adam); >= 1 for sgd
    init: float = 1e-6  # initial scale: std init (or init/√entries, init_convention)
    init_convention: str = "original"  # src.models.dynamics.INIT_CONVENTIONS
    log_every: int = 10  # epochs between records of W_KQ's singular values
    normalize: bool = False  # divide X Xᵀ (and z) by N, as the paper's formulas; the original's code does not
    float64: bool = False  # train in float64 (exactness checks)
    vary_len: bool = added_field(False)  # the original's --vary_len: the loss over every prefix 2..N, ŷ / its length
    track_value: bool = added_field(False)  # the original's --track_value: each head's value y -> y weight per epoch
    softmax: bool = added_field(False)  # the original's --softmax: softmax over the keys (direct loss, no moments)


@dataclass(frozen=True)
class DynamicsSettings(Settings):
    system: ClassVar[str] = "dynamics"
    required_keys: ClassVar[tuple] = ("task", "model", "train")
    unit: ClassVar[str] = "epoch"
    legacy_keys: ClassVar[dict] = {"train.lr": "train.learning_rate"}
    absent_means: ClassVar[dict] = {"train.init_convention": "uniform"}  # records written before it
    task: DynamicsTaskConfig = field(default_factory=DynamicsTaskConfig)
    model: Choice = choice_field("dynamics_model", "attn_merged")
    train: DynamicsTrain = field(default_factory=DynamicsTrain)
    show: bool = False  # write the loss figure (the original's --show; nothing is displayed)

    def describe(self) -> str:
        return self.model.name

    def loss_figure_file(self) -> str | None:
        return names.LOSS_PNG if self.show else None

    check = check_dynamics_settings  # the system's own rules: src/systems/dynamics_checks.py


class Moments(NamedTuple):
    gram: jax.Array  # G = FᵀF/P [F, F]
    cross: jax.Array  # b = Fᵀy/P [F]
    energy: jax.Array  # c = yᵀy/P []


def moments(features: Callable[[jax.Array], jax.Array], data: SequenceSet, dtype) -> Moments:
    """The loss moments of a set, accumulated over chunks of sequences."""
    size = len(data.targets)
    featurize = jax.jit(features)
    gram = cross = 0.0
    for start in range(0, size, MOMENT_CHUNK):
        f = featurize(jnp.asarray(data.tokens[start : start + MOMENT_CHUNK], dtype))
        y = jnp.asarray(data.targets[start : start + MOMENT_CHUNK], dtype)
        gram = gram + f.T @ f
        cross = cross + f.T @ y
    return Moments(gram / size, cross / size, jnp.asarray(np.mean(data.targets**2), dtype))


def prefix_moments(features: Callable[[jax.Array], jax.Array], data: SequenceSet, dtype) -> Moments:
    """The moments of the original's --vary_len loss: the mean over prefix lengths n = 2..T of the
    loss on the first n tokens, token n's y hidden and predicted (features: ŷ divided by n)."""
    tokens, total = np.asarray(data.tokens), 0.0
    count = tokens.shape[1] - 1
    for n in range(2, tokens.shape[1] + 1):
        prefix = tokens[:, :n].copy()
        targets = prefix[:, -1, -1].copy() if n < tokens.shape[1] else np.asarray(data.targets)
        prefix[:, -1, -1] = 0.0
        m = moments(lambda x, n=n: features(x) / n, SequenceSet(prefix, targets), dtype)
        total = m if isinstance(total, float) else Moments(*(a + b for a, b in zip(total, m)))
    return Moments(*(a / count for a in total))


def quadratic_loss(t: jax.Array, m: Moments) -> jax.Array:
    """(1/P) Σ (F t − y)² from the moments."""
    return t @ m.gram @ t - 2.0 * m.cross @ t + m.energy


class DynamicsTrainer(SystemTrainer):
    unit = "epoch"

    def __init__(
        self, settings: DynamicsSettings, sets: dict[str, SequenceSet] | None = None, init_params: dict | None = None
    ):
        from src.registry import registry

        self.settings = settings
        tr = settings.train
        self.steps, self.log_every, self.checkpoint_every = tr.epochs, tr.log_every, tr.checkpoint_every
        self.model = registry("dynamics_model").get(settings.model.name).build(settings.model.options)
        self.sets, self.init_params = sets, init_params
        self.optimizer = make_optimizer(Optimizer(OPTIMIZERS[tr.optimizer], tr.learning_rate), tr.epochs)
        self.dtype = jnp.float64 if tr.float64 else jnp.float32
        self._ready = False

    def context(self):
        return jax.enable_x64(True) if self.settings.train.float64 else contextlib.nullcontext()

    def _prepare(self) -> None:
        """The data, their losses and the compiled interval (inside `context`)."""
        if self._ready:
            return
        tr, model = self.settings.train, self.model
        sets = self.sets if self.sets is not None else make_sets(self.settings.task)
        train_loss, tests, batch_loss = (self._direct_losses if tr.softmax else self._moment_losses)(sets)
        size = len(sets["train"].targets)
        full_batch_step, minibatch_step = (
            gradient_step(train_loss, self.optimizer),
            gradient_step(batch_loss, self.optimizer),
        )

        def epoch(carry, index):
            p, state = carry
            per_epoch = {f"{n}_loss": loss(p) for n, loss in tests.items()}
            if tr.track_value:  # before the update, as the loss and the original's record
                per_epoch["value_yy"] = model.value_y(p)
            if tr.batch_size:  # minibatch SGD: one pass over a fresh permutation
                value = train_loss(p)
                order = jax.random.permutation(jax.random.fold_in(jax.random.key(tr.seed), index), size)
                batches = order[: size // tr.batch_size * tr.batch_size].reshape(-1, tr.batch_size)

                def step(inner, rows):
                    q, s, _ = minibatch_step(*inner, rows)
                    return (q, s), None

                (p, state), _ = jax.lax.scan(step, (p, state), batches)
            else:
                p, state, value = full_batch_step(p, state)
            return (p, state), (value, per_epoch)

        epochs = scan_chunk(lambda carry, index, _: epoch(carry, index))  # an epoch is the step here

        @partial(jax.jit, static_argnums=3)
        def interval(p, state, first, count):
            """`count` epochs from epoch `first`, then the record at the end."""
            (p, state), (values, per_epoch) = epochs((p, state), None, first, count)
            return p, state, values, per_epoch, self._record(p)

        self._interval, self._ready = interval, True

    def _moment_losses(self, sets: dict[str, SequenceSet]):
        """(θ -> training loss, {test set: θ -> loss}, (θ, rows) -> minibatch loss) of a linear
        model ŷ = F t(θ): the training and test losses from their moments."""
        tr, dtype, model = self.settings.train, self.dtype, self.model
        if tr.vary_len:  # the original divides ŷ by the tokens it reads, also on the test sets
            featurize = lambda tokens: model.features(tokens, False) / tokens.shape[1]
            train_m = prefix_moments(lambda tokens: model.features(tokens, False), sets["train"], dtype)
        else:
            featurize = lambda tokens: model.features(tokens, tr.normalize)
            train_m = moments(featurize, sets["train"], dtype)
        tests = {name: moments(featurize, data, dtype) for name, data in sets.items() if name != "train"}
        features = featurize(jnp.asarray(sets["train"].tokens, dtype)) if tr.batch_size else None
        targets = jnp.asarray(sets["train"].targets, dtype)
        on = lambda m: lambda q: quadratic_loss(model.coefficients(q), m)
        return (
            on(train_m),
            {name: on(m) for name, m in tests.items()},
            lambda q, rows: jnp.mean((features[rows] @ model.coefficients(q) - targets[rows]) ** 2),
        )

    def _direct_losses(self, sets: dict[str, SequenceSet]):
        """The same three of softmax attention, from the sequences themselves (vary_len: the
        training loss over every prefix, ŷ / T on the test sets, as the moments path)."""
        tr, model = self.settings.train, self.model
        data = {n: (jnp.asarray(d.tokens, self.dtype), jnp.asarray(d.targets, self.dtype)) for n, d in sets.items()}
        on = lambda x, y, **how: lambda q: softmax_loss(model.values(q), model.kq(q), x, y, **how)
        tokens, targets = data["train"]
        return (
            on(*data["train"], prefixes=tr.vary_len),
            {name: on(*d, per_length=tr.vary_len) for name, d in data.items() if name != "train"},
            lambda q, rows: on(tokens[rows], targets[rows])(q),
        )

    def _record(self, p) -> dict:
        """Singular values of every head's W_KQ (NaN for a W_KQ that overflowed: LAPACK is never
        handed a non-finite matrix) and (not with softmax) the per-head principal-component diagonals."""
        kq = self.model.kq(p)
        finite = jnp.all(jnp.isfinite(kq))
        singular_values = jnp.linalg.svd(jnp.where(finite, kq, 0.0), compute_uv=False)
        records = {"singular_values": jnp.where(finite, singular_values, jnp.nan)}
        if not self.settings.train.softmax:
            records["gamma_diag"] = jnp.diagonal(self.model.gamma(p), axis1=1, axis2=2)
        return records

    def init_state(self) -> TrainState:
        tr = self.settings.train
        params = self.init_params or self.model.init(
            jax.random.key(tr.seed), self.settings.task.in_dim, tr.init, tr.init_convention
        )
        params = jax.tree_util.tree_map(lambda a: jnp.asarray(a, self.dtype), params)
        return TrainState(params, self.optimizer.init(params))

    def initial_records(self, state) -> dict:
        return {k: np.asarray(v) for k, v in jax.jit(self._record)(state.params).items()}

    def run_chunk(self, state, first, num_steps) -> Chunk:
        self._prepare()
        p, opt_state, values, per_epoch, records = self._interval(state.params, state.opt_state, first, num_steps)
        return Chunk(TrainState(p, opt_state), values, per_epoch, records)

    def row(self, state, step, losses) -> dict | None:
        """Rows at about 20 points of the run (the original prints the loss that often)."""
        every = max(self.log_every, self.steps // 20)
        if step % every < self.log_every or step == self.steps:
            return {"train_loss": float(losses[-1])}
        return None

    def headline(self, row: dict) -> dict[str, str]:
        return {"loss": f"{row['train_loss']:.5f}"}

    def params_arrays(self, result: LoopResult) -> dict:
        return {f"model/{k}": np.asarray(v) for k, v in result.state.params.items()}

    def trajectory(self, result: LoopResult) -> Arrays:
        """dynamics.npz: losses per epoch as float64 (exact copies of the float32 values), the
        records per log point as trained."""
        at_log = result.at_log
        gamma = {} if self.settings.train.softmax else {"gamma_diag": at_log["gamma_diag"]}
        return Arrays(
            {
                "loss": np.asarray(result.per_step["loss"], np.float64),
                "log_epochs": at_log["step"],
                "singular_values": at_log["singular_values"],
                **gamma,
                **{k: np.asarray(v, np.float64) for k, v in result.per_step.items() if k != "loss"},
            }
        )

    def outputs(self, result: LoopResult) -> dict:
        return {names.DYNAMICS: self.trajectory(result), **original_loss_file(self.settings, result.per_step)}

    def summary(self, result: LoopResult) -> dict:
        s, loss = self.settings, result.per_step["loss"]
        final = {
            f"final_{k}": (np.asarray(v[-1]).tolist() if np.ndim(v) > 1 else float(v[-1])) if len(v) else None
            for k, v in result.per_step.items()
            if k != "loss"
        }
        return {
            "model": s.model.name,
            "seed": s.train.seed,
            "epochs": int(len(loss)),
            "epochs_requested": s.train.epochs,
            "final_loss": float(loss[-1]) if len(loss) else None,
            "initial_loss": float(loss[0]) if len(loss) else None,
            **final,
            "train_seconds": round(result.seconds, 3),
            "ms_per_epoch": round(1000 * result.seconds / max(1, len(loss)), 4),
        }

    def report(self, result: LoopResult, run) -> str:
        loss = result.per_step["loss"]
        line = (
            f"{self.settings.model.name}: {len(loss)} epochs in {result.seconds:.1f}s "
            f"({1000 * result.seconds / max(1, len(loss)):.3f} ms/epoch) | loss {loss[0]:.4f} -> "
            f"{loss[-1]:.4f}"
        )
        if run.exists(names.DYNAMICS_JSON):
            line += f" | {drops_phrase(run.load_json(names.DYNAMICS_JSON)['drops'])}"
        return line


def drops_phrase(drops: list[dict]) -> str:
    """'N drop(s) at epochs [...]' of analysis/dynamics.json's drops, saying when the last one
    ends the run still falling."""
    tail = " (the last still falling at the end)" if drops and drops[-1].get("to_plateau", 0) is None else ""
    return f"{len(drops)} drop(s) at epochs {[d['epoch'] for d in drops]}{tail}"


def original_file_id(settings: DynamicsSettings) -> str:
    """The original's name for a run: {model}_head{H}_D{D}_R{R}_P{P}_N{N}_seed{seed}."""
    t, opts = settings.task, settings.model.options
    return (
        f"{ORIGINAL_MODELS[settings.model.name]}_head{opts.heads}_D{t.in_dim}_R{getattr(opts, 'rank', 1)}"
        f"_P{t.trainset_size}_N{t.seq_len}_seed{settings.train.seed}"
    )


def original_loss_file(settings: DynamicsSettings, per_step: dict) -> dict[str, str]:
    """The original's loss text file {name: text}, as its np.savetxt writes it: with test sets
    `<id>_icl<c>.txt` (train, in-weight, in-context loss per epoch), else `<id>.txt` (train)."""
    loss = np.asarray(per_step["loss"], np.float64)
    if settings.task.testset_size:
        name = f"{original_file_id(settings)}_icl{float(settings.task.icl)}.txt"
        table = np.stack(
            [
                loss,
                np.asarray(per_step["test_iwl_loss"], np.float64),
                np.asarray(per_step["test_icl_loss"], np.float64),
            ],
            axis=1,
        )
    else:
        name, table = f"{original_file_id(settings)}.txt", loss
    text = io.StringIO()
    np.savetxt(text, table)
    return {name: text.getvalue()}


@register_system(
    DynamicsSettings,
    doc="Zhang et al. 2025: linear attention trained by full-batch "
    "GD on a fixed set; loss at every epoch, W_KQ spectra",
)
def build_dynamics(settings: DynamicsSettings) -> DynamicsTrainer:
    return DynamicsTrainer(settings)
