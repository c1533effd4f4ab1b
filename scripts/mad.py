"""MAD's six token tasks on every mixer of the zoo (Poli et al., ICML 2024, "Mechanistic Design and
Scaling of Hybrid Architectures"; athms/mad-lab) at a CPU's scale: `make mad` runs configs/mad.yaml.

    python -m scripts.mad                                  # configs/mad.yaml: 12 mixers x 6 tasks, seed 0
    python -m scripts.mad --mixers attention,mamba         # any of the study's mixers (or registered ones)
    python -m scripts.mad --config configs/paper/mad.yaml  # MAD's own protocol and difficulty grid (a GPU study)
    python -m scripts.mad --quick                          # width 16, 2 mixers, 30 steps a task (a smoke test)

Every model is MAD's block, [mixer, SwiGLU] x 2: two pre-norm blocks (layer norm) of the mixer and a
SwiGLU state mixer, rotary positions inside attention and no position encoding elsewhere (MAD's
layers: rotary attention, none for the others), token embedding and a separate read-out; compression
reads out through MAD's decoder (src/models/sequence.py `compress`). The tasks and their defaults
are src/tasks/mad.py's (MAD's baseline settings); every batch is fresh. AdamW, warm-up then cosine
decay; each cell reports the best of the grid's learning rates (and weight decays).

Each run is the recipe's settings (`python -m runners.recipe task:<task> model.seq_mixer:<mixer>
model.state_mixer:swiglu ...`), made by the job engine (finished runs are reused). Report:
report/MAD.md, report/mad_results.json and report/figures/mad/*.png (plots/mad_report.py; quick:
under report/quick), beside MAD's table (shared/ANCHORS.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from scripts.mixers_grid import mixer_choices
from src.flags import UsageError, refuse_repeats
from src.jobs.declared import Cell, Study, StudyRun
from src.jobs.study import run_as_command, study_command
from src.registry import choice
from src.settings import SettingsError
from src.systems.lm import LMTrain, lm_settings_unchecked
from src.yaml_includes import load as load_yaml

CONFIG = "configs/mad.yaml"
# the zoo's mixers as the studies spell them (label, spelling): Zoology's BaseConv alternates a short
# and the long convolution by layer, its Based model is a BaseConv layer then Based
MIXERS = (
    ("attention", "attention"),
    ("linear attention", "linear_attention"),
    ("GLA", "gated_linear_attn"),
    ("BaseConv", "base_conv+base_conv:kernel_size=-1"),
    ("H3", "h3"),
    ("Hyena", "hyena"),
    ("Based", "base_conv+based"),
    ("DeltaNet", "delta_net"),
    ("Gated DeltaNet", "gated_delta_net"),
    ("Mamba", "mamba"),
    ("Mamba-2", "mamba2"),
    ("RWKV-7", "rwkv7"),
)
TASKS = ("in_context_recall", "fuzzy_recall", "noisy_recall", "selective_copying", "compression", "memorization")


@dataclass(frozen=True)
class MadGrid:
    """What the study trains (configs/mad.yaml; configs/paper/mad.yaml is MAD's protocol). `tasks`:
    {task: {steps, variants: [options, ...]}} (an empty variant {} is the baseline)."""

    width: int = 64
    heads: int = 4
    batch_size: int = 32
    learning_rates: tuple = (3e-3,)
    weight_decays: tuple = (0.1,)
    warmup_fraction: float = 0.03
    mixers: tuple = tuple(spelling for _, spelling in MIXERS)
    tasks: dict = field(default_factory=lambda: {t: {"steps": 600, "variants": [{}]} for t in TASKS})


GRID_KEYS = {f for f in MadGrid.__dataclass_fields__}
TASK_KEYS = {"steps", "variants"}
QUICK = MadGrid(
    width=16, heads=2, mixers=("attention", "mamba2"), tasks={t: {"steps": 30, "variants": [{}]} for t in TASKS}
)


def read_grid(path: str) -> MadGrid:
    """The MadGrid of a YAML file (UsageError, one line, naming the key, the value and what is accepted)."""
    raw = load_yaml(path)
    if not isinstance(raw, dict):
        raise UsageError(
            f"--config={path!r}: the file holds {type(raw).__name__}; accepted: a mapping of "
            f"{', '.join(sorted(GRID_KEYS))}"
        )
    unknown = sorted(set(raw) - GRID_KEYS)
    if unknown:
        raise UsageError(f"{path}: key {unknown[0]!r} is unknown; accepted: {', '.join(sorted(GRID_KEYS))}")
    values = dict(raw)
    for key in ("learning_rates", "weight_decays", "mixers"):
        if key in values:
            if not isinstance(values[key], list) or not values[key]:
                raise UsageError(f"{path}: {key}={values[key]!r} is not accepted; accepted: a non-empty list")
            values[key] = tuple(values[key])
    tasks = values.get("tasks", MadGrid().tasks)
    if not isinstance(tasks, dict) or not tasks:
        raise UsageError(f"{path}: tasks={tasks!r} is not accepted; accepted: a mapping task -> {{steps, variants}}")
    for name, spec in tasks.items():
        if name not in TASKS:
            raise UsageError(f"{path}: tasks.{name} is unknown; accepted: {', '.join(TASKS)}")
        if not isinstance(spec, dict) or set(spec) - TASK_KEYS:
            raise UsageError(f"{path}: tasks.{name}={spec!r} is not accepted; accepted: a mapping of steps, variants")
        if not isinstance(spec.get("variants", [{}]), list) or not all(
            isinstance(v, dict) for v in spec.get("variants", [{}])
        ):
            raise UsageError(f"{path}: tasks.{name}.variants is not accepted; accepted: a list of option mappings")
    values["tasks"] = {n: {"steps": s.get("steps", 600), "variants": s.get("variants", [{}])} for n, s in tasks.items()}
    return MadGrid(**{**MadGrid().__dict__, **values})


def variant_label(variant: dict) -> str:
    """A task variant's run-name part: '' for the baseline, else _key-value pairs."""
    return "".join(f"_{k}{v}" for k, v in sorted(variant.items()))


def mad_settings(mixer: str, task: str, variant: dict, steps: int, grid: MadGrid, weight_decay: float):
    """One run's settings, validated (SettingsError, one line): MAD's block around `mixer`."""
    seq, layers = mixer_choices(mixer)
    train = LMTrain(
        steps=steps,
        batch_size=grid.batch_size,
        learning_rate=grid.learning_rates[0],
        weight_decay=weight_decay,
        warmup_fraction=grid.warmup_fraction,
        log_every=max(steps // 10, 1),
        checkpoint_every=steps,
        eval_size=512,
    )
    settings = lm_settings_unchecked(
        choice("task", task, **variant),
        seq,
        choice("state_mixer", "swiglu"),
        width=grid.width,
        n_layer=2,
        n_head=grid.heads,
        train=train,
        seq_mixers=layers,
    )
    model = replace(
        settings.model,
        position=choice("position", "rope"),
        positions_for="attention",
        norm=choice("norm", "layer_norm"),
    )
    return replace(settings, model=model).validate()


def mixer_list(text: str | None, grid: MadGrid) -> list[str]:
    names = [m.strip() for m in text.split(",") if m.strip()] if text else list(grid.mixers)
    if not names:
        raise UsageError(
            f"--mixers={text!r} is not accepted; accepted: a comma list of mixers (python -m runners.recipe --choices)"
        )
    refuse_repeats("--mixers", text, names)
    for name in names:
        mixer_choices(name)
    return names


def grid_of(flags) -> MadGrid:
    return QUICK if flags.quick and not flags.config else read_grid(flags.config or CONFIG)


def study_cells(flags, runs_dir) -> list[Cell]:
    grid = grid_of(flags)
    labels = dict((spelling, label) for label, spelling in MIXERS)
    cells = []
    for task, spec in grid.tasks.items():
        for variant in spec["variants"]:
            for mixer in mixer_list(flags.mixers, grid):
                for decay in grid.weight_decays:
                    name = (
                        f"{task}{variant_label(variant)}_{mixer.replace(':', '_').replace('=', '').replace('+', '-')}"
                    )
                    if len(grid.weight_decays) > 1:
                        name += f"_wd{decay:g}"
                    try:
                        settings = mad_settings(mixer, task, variant, spec["steps"], grid, decay)
                    except SettingsError as err:
                        raise UsageError(f"{task} {variant or ''} with {mixer}: {err}") from None
                    tags = {"task": task, "variant": variant, "mixer": mixer, "label": labels.get(mixer, mixer)}
                    tags.update(weight_decay=decay, width=grid.width, steps=spec["steps"], batch_size=grid.batch_size)
                    cost = spec["steps"] * settings.task.options.tokens()
                    cells.append(Cell(name, settings, tags, cost=cost, analyses=()))
    return cells


def add_flags(parser) -> None:
    parser.add_argument("--mixers", default=None, help="comma list (default: the grid's, the zoo's 12)")
    parser.add_argument("--config", default=None, help=f"a YAML grid (MadGrid's keys; default {CONFIG})")


def report(run: StudyRun) -> list:
    from plots.mad_report import write_report

    return write_report(run, MIXERS)


STUDY = Study(
    "mad",
    __doc__,
    "width 16, attention and Mamba-2, 30 steps a task (a smoke test)",
    cells=study_cells,
    report=report,
    seeds=lambda flags: (0,),
    learning_rates=lambda flags: grid_of(flags).learning_rates,
    flags=add_flags,
    check=lambda flags: mixer_list(flags.mixers, grid_of(flags)),
)
main = study_command(STUDY)

if __name__ == "__main__":
    run_as_command(STUDY)
