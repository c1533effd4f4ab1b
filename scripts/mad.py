"""MAD's six token tasks on every mixer of the zoo (Poli et al., ICML 2024, "Mechanistic Design and
Scaling of Hybrid Architectures"; athms/mad-lab) at a CPU's scale: `make mad` runs configs/mad.yaml.

    python -m scripts.mad                                  # configs/mad.yaml: 12 mixers x 6 tasks, seed 0
    python -m scripts.mad --mixers attention,mamba         # any of the study's mixers (or registered ones)
    python -m scripts.mad --config configs/paper/mad.yaml  # MAD's own protocol and difficulty grid (a GPU study)
    python -m scripts.mad --quick                          # width 16, 2 mixers, 30 steps a task (a smoke test)
    python -m scripts.mad --tasks compression,memorization # only these of the grid's tasks
    python -m scripts.mad --settling                       # the grid and its settling runs (make mad_settling)

Every model is MAD's block, [mixer, SwiGLU] x 2: two pre-norm blocks (layer norm) of the mixer and a
SwiGLU state mixer, rotary positions inside attention and no position encoding elsewhere (MAD's
layers: rotary attention, none for the others), token embedding and a separate read-out; compression
reads out through MAD's decoder (src/models/sequence.py `compress`). The tasks and their defaults
are src/tasks/mad.py's (MAD's baseline settings); every batch is fresh. AdamW, warm-up then cosine
decay; each cell reports the best of the grid's learning rates (and weight decays). The grid's
`settling` runs train one mixer longer on a task (attention on selective copying: the budget its
0.99 would take), beside the table, not in it; only with --settling (`make mad_settling`, which
reuses the grid's finished runs), so that `make mad` fits 90 minutes on 2 cores.

Each run is the recipe's settings (`python -m runners.recipe task:<task> model.seq_mixer:<mixer>
model.state_mixer:swiglu ...`), made by the job engine (finished runs are reused). Report:
report/MAD.md, report/mad_results.json and report/figures/mad/*.png (plots/mad_report.py; quick:
under report/quick), beside MAD's table (shared/ANCHORS.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace


from scripts.mad_claims import chance_levels, checks, orderings, run_scores, settling_runs
from scripts.mixers import run_label
from scripts.mixers_grid import mixer_choices, read_mapping
from src import rundir as names
from src.flags import UsageError, refuse_repeats
from src.jobs.declared import Cell, Study, StudyRun
from src.jobs.study import run_as_command, study_command
from src.registry import choice
from src.settings import SettingsError
from src.systems.lm import LMTrain, lm_settings_unchecked

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
LABELS = {spelling: label for label, spelling in MIXERS}  # a mixer's spelling -> its name
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
    # {task: {mixer, steps}}: one longer run of a mixer at the task's baseline, beside the grid's (how
    # far the grid's budget is from the claim's threshold: the budget a claim would take)
    settling: dict = field(default_factory=dict)


GRID_KEYS = {f for f in MadGrid.__dataclass_fields__}
TASK_KEYS = {"steps", "variants"}
SETTLING_KEYS = {"mixer", "steps"}
QUICK = MadGrid(
    width=16,
    heads=2,
    mixers=("attention", "mamba2"),
    tasks={t: {"steps": 30, "variants": [{}]} for t in TASKS},
    settling={"selective_copying": {"mixer": "attention", "steps": 60}},
)


def read_grid(path: str) -> MadGrid:
    """The MadGrid of a YAML file (UsageError, one line, naming the key, the value and what is accepted)."""
    raw = read_mapping(path, GRID_KEYS)
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
    settling = values.get("settling", {})
    if not isinstance(settling, dict):
        raise UsageError(f"{path}: settling={settling!r} is not accepted; accepted: a mapping task -> {{mixer, steps}}")
    for name, spec in settling.items():
        if name not in values["tasks"]:
            raise UsageError(f"{path}: settling.{name} is not accepted; accepted: one of the grid's tasks")
        steps = spec.get("steps") if isinstance(spec, dict) else None
        if set(spec or {}) != SETTLING_KEYS or not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
            raise UsageError(
                f"{path}: settling.{name}={spec!r} is not accepted; accepted: a mapping of mixer and steps "
                "(an integer ≥ 1)"
            )
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
    """The study's grid: --quick's, or the --config file's, narrowed to --tasks when given."""
    grid = QUICK if flags.quick and not flags.config else read_grid(flags.config or CONFIG)
    if getattr(flags, "tasks", None) is None:
        return grid
    names = [t.strip() for t in flags.tasks.split(",") if t.strip()]
    refuse_repeats("--tasks", flags.tasks, names)
    for name in names:
        if name not in grid.tasks:
            raise UsageError(f"--tasks: {name!r} is not accepted; accepted: the grid's tasks ({', '.join(grid.tasks)})")
    if not names:
        raise UsageError(f"--tasks={flags.tasks!r} is not accepted; accepted: a comma list of the grid's tasks")
    return replace(
        grid,
        tasks={t: grid.tasks[t] for t in names},
        settling={t: spec for t, spec in grid.settling.items() if t in names},
    )


def mad_cell(grid: MadGrid, name: str, mixer: str, task: str, variant: dict, steps: int, decay: float, **extra):
    """One cell of the study: its validated settings (a refusal names the task, variant and mixer in
    one line) and its tags (`extra` joins them: `settling`)."""
    try:
        settings = mad_settings(mixer, task, variant, steps, grid, decay)
    except SettingsError as err:
        where = "settling " if extra.get("settling") else ""
        raise UsageError(f"{where}{task} {variant or ''} with {mixer}: {err}") from None
    tags = {"task": task, "variant": variant, "mixer": mixer, "label": LABELS.get(mixer, mixer), **extra}
    tags.update(weight_decay=decay, width=grid.width, steps=steps, batch_size=grid.batch_size)
    return Cell(name, settings, tags, cost=steps * settings.task.options.tokens(), analyses=())


def study_cells(flags, runs_dir) -> list[Cell]:
    grid = grid_of(flags)
    chosen = mixer_list(flags.mixers, grid)
    cells = []
    for task, spec in grid.tasks.items():
        for variant in spec["variants"]:
            for mixer in chosen:
                for decay in grid.weight_decays:
                    name = f"{task}{variant_label(variant)}_{run_label(mixer).replace('+', '-')}"
                    if len(grid.weight_decays) > 1:
                        name += f"_wd{decay:g}"
                    cells.append(mad_cell(grid, name, mixer, task, variant, spec["steps"], decay))
    for task, spec in grid.settling.items() if getattr(flags, "settling", False) else ():
        mixer, steps = spec["mixer"], spec["steps"]
        if mixer in chosen:  # else --mixers left it out
            name = f"{task}_{run_label(mixer).replace('+', '-')}_settling{steps}"
            cells.append(mad_cell(grid, name, mixer, task, {}, steps, grid.weight_decays[0], settling=True))
    return cells


def add_flags(parser) -> None:
    parser.add_argument("--mixers", default=None, help="comma list (default: the grid's, the zoo's 12)")
    parser.add_argument("--config", default=None, help=f"a YAML grid (MadGrid's keys; default {CONFIG})")
    parser.add_argument("--tasks", default=None, help="comma list: only these of the grid's tasks (default: all)")
    parser.add_argument(
        "--settling",
        action="store_true",
        help="also train the grid's settling runs (make mad_settling; the grid's finished runs are reused)",
    )


def _state_floats(job) -> int:
    """Floats of recurrent state the run's model keeps per sequence at the task's length, over its
    layers (register_mixer's `state`)."""
    from src.systems.lm import LMSettings

    settings = LMSettings.from_dict(job.expected)
    return int(settings.model.state_floats(settings.task.options.tokens()))


def aggregate(run: StudyRun) -> dict:
    """{task: {mixer: {label, accuracy, macro_accuracy, learning_rate, weight_decay, state_floats,
    seconds, tried: [{learning_rate, weight_decay, accuracy, macro_accuracy}]}}}: each cell the best
    of its rates and decays by per-class accuracy (MAD's metric), baseline variants only."""
    tasks: dict = {}
    for job in run.jobs:
        if job.variant or job.tags.get("settling") or not job.run.exists(names.SUMMARY):
            continue
        tried = {"learning_rate": job.learning_rate, "weight_decay": job.weight_decay, **run_scores(job)}
        cell = tasks.setdefault(job.task, {}).setdefault(
            job.mixer, {"label": job.label, "tried": [], "state_floats": _state_floats(job), "steps": job.steps}
        )
        cell["tried"].append(tried)
    for cells in tasks.values():
        for cell in cells.values():
            best = max(cell["tried"], key=lambda t: -1.0 if t["macro_accuracy"] is None else t["macro_accuracy"])
            keys = ("learning_rate", "weight_decay", "accuracy", "macro_accuracy", "seconds", "curve")
            cell.update({k: best[k] for k in keys})
    return tasks


def report(run: StudyRun) -> list:
    from plots.mad_report import write_report

    tasks, settling = aggregate(run), settling_runs(run)
    declared = grid_of(run.flags).settling if run.flags is not None else {}
    found = checks(tasks, settling, declared)
    return write_report(run, LABELS, tasks, found, orderings(tasks), chance_levels(run), settling)


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
