"""The settings checks of system `gpt2` (src/systems/gpt2.py): GPT2Settings.check, a pair task and
its curriculum, the model against the curriculum, the training-time pair curriculum, the system's own
training fields, and the shared integer ranges and memory estimate a run is held to (src/bounds.py).
"""

from __future__ import annotations

import jax

from src.bounds import check_memory, check_sizes
from src.gd_paper.config import NOISE_MODES, ORDERINGS, PLACEMENTS
from src.gd_paper.curricula import is_exchangeable
from src.models.mixers.kit import check_lengths
from src.precision import PRECISIONS
from src.registry import registry
from src.settings import SettingsError, is_int, require, require_int, require_number, require_one_of
from src.systems.gpt2_prompts import run_bytes, sampler
from src.tasks.objectives import objective_of, tasks_for
from src.tasks.pools import check_pool


def check_gpt2_settings(settings) -> None:
    """GPT2Settings.check: a SettingsError for the first rule that fails, in this order."""
    _check_task_and_curriculum(settings)
    _check_model(settings)
    _check_train_curriculum(settings)
    _check_train(settings)
    _check_shapes(settings)


def _check_task_and_curriculum(settings) -> None:
    """A pair task, and the curriculum's dimension and point schedules."""
    pair_tasks = tasks_for("pairs")
    require(settings.task.name in pair_tasks, "task", settings.task.name, ", ".join(pair_tasks))
    for name, schedule in (("dims", settings.curriculum.dims), ("points", settings.curriculum.points)):
        path = f"curriculum.{name}"
        require_int(f"{path}.start", schedule.start, 1)
        require_int(f"{path}.end", schedule.end, 1)
        require_int(f"{path}.inc", schedule.inc, 0)
        require_int(f"{path}.interval", schedule.interval, 1)
        require(schedule.end >= schedule.start, f"{path}.end", schedule.end, f"end >= {path}.start={schedule.start}")
        require(
            schedule.inc >= 1 or schedule.end == schedule.start,
            f"{path}.inc",
            schedule.inc,
            f">= 1 (with inc 0 the curriculum never grows from {path}.start={schedule.start} to "
            f"{path}.end={schedule.end})",
        )


def _check_model(settings) -> None:
    """Pair inputs, no dropout, and dimensions and positions that cover the curriculum's last."""
    m, c = settings.model, settings.curriculum
    require(m.inputs == "pairs", "model.inputs", m.inputs, "pairs (x/y tokens)")
    for path, rate in [("model.embed_dropout", m.embed_dropout)] + [
        ("model.seq_mixer.options.dropout", getattr(x.options, "dropout", 0.0)) for x in m.mixers_used()
    ]:
        require(not rate, path, rate, "0 (the lm system alone trains with dropout)")
    require(
        m.n_dims == c.dims.end,
        "model.n_dims",
        m.n_dims,
        f"the curriculum's last dimension, curriculum.dims.end={c.dims.end}",
    )
    try:
        table = m.encoding().max_tokens()
    except (ValueError, SettingsError):
        table = 0  # the encoding's own refusal comes below
    if table is not None:  # a position table: it must cover the trained points
        require(
            is_int(m.max_tokens) and m.max_tokens >= 2 * c.points.end,
            "model.max_tokens",
            m.max_tokens,
            f">= {2 * c.points.end} tokens, two per point of curriculum.points.end={c.points.end} "
            f"(model.n_positions >= {c.points.end})",
        )
    if getattr(settings.task.options, "fixed_dimension", False):
        require(
            c.dims.start == c.dims.end,
            "curriculum.dims.start",
            c.dims.start,
            f"curriculum.dims.end={c.dims.end}: the boolean task {settings.task.name!r} takes a fixed dimension",
        )


def _check_train_curriculum(settings) -> None:
    """The training-time pair curriculum's choices and rates, and what a non-exchangeable one needs."""
    c, pc = settings.curriculum, settings.train_curriculum
    for key, accepted in (("ordering", ORDERINGS), ("noise_mode", NOISE_MODES), ("noise_placement", PLACEMENTS)):
        require_one_of(f"train_curriculum.{key}", getattr(pc, key), accepted)
    require_number("train_curriculum.noise_p", pc.noise_p, 0, high=1)
    require_number("train_curriculum.noise_sigma", pc.noise_sigma, 0)
    if not is_exchangeable(pc):
        require(
            c.points.start == c.points.end,
            "curriculum.points.start",
            c.points.start,
            f"curriculum.points.end={c.points.end}: a training-time pair curriculum needs a fixed number of points",
        )
        require(
            objective_of(settings.task.name).continuous_labels or pc.noise_mode != "label_noise",
            "train_curriculum.noise_mode",
            pc.noise_mode,
            f"clean or random_pairs for the task {settings.task.name!r} (its labels are not real numbers)",
        )


def _check_train(settings) -> None:
    """The system's own training fields (the shared ones: src.train_settings.StepTrain)."""
    tr = settings.train
    require_one_of("train.precision", tr.precision, tuple(PRECISIONS))
    require(isinstance(tr.flat_update, bool), "train.flat_update", tr.flat_update, "true or false")
    check_pool("train.", tr.num_tasks, tr.num_training_examples, settings.task.name)


def _check_shapes(settings) -> None:
    """The shared integer ranges, the memory estimate, the encoding's and the task's checks at this shape."""
    m, c = settings.model, settings.curriculum
    try:  # the shared integer ranges and the memory estimate (src/bounds.py)
        check_sizes(
            ("d", "model.n_dims", m.n_dims),
            ("width", "model.width", m.width),
            ("heads", "model.n_head", m.n_head),
            ("layers", "model.n_layer", m.n_layer),
            ("points", "model.max_tokens", m.max_tokens),
        )
        check_memory(run_bytes(settings), "this run")
        check_lengths(m, m.max_tokens)  # options that depend on the sequence
        encoding = m.encoding()  # the encoding's own checks, and whether the mixer takes it
        for mixer in [
            c.name for c in m.mixers_used() if not registry("seq_mixer").get(c.name).build.takes_any_position
        ]:
            encoding.require_plain(mixer)
        # the task's own checks at this shape (k <= d, ...), traced without drawing anything
        jax.eval_shape(lambda key: sampler(settings)(key, 1, c.dims.end, c.points.end), jax.random.key(0))
    except SettingsError:
        raise
    except ValueError as err:
        raise SettingsError(str(err)) from None
