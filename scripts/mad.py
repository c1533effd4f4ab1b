"""MAD's six token tasks on every mixer of the zoo (Poli et al., ICML 2024, "Mechanistic Design and
Scaling of Hybrid Architectures"; athms/mad-lab) at a CPU's scale: `make mad` runs configs/mad.yaml.

    python -m scripts.mad                                  # configs/mad.yaml: 12 mixers x 6 tasks, seed 0
    python -m scripts.mad --mixers attention,mamba         # any of the study's mixers (or registered ones)
    python -m scripts.mad --config configs/paper/mad.yaml  # MAD's own protocol and difficulty grid (a GPU study)
    python -m scripts.mad --quick                          # width 16, 2 mixers, 30 steps a task (a smoke test)
    python -m scripts.mad --tasks compression,memorization # only these of the grid's tasks

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


import numpy as np

from plots.mad_report import MAD_SCORES, TASK_LABELS
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
TARGETS = {"in_context_recall": 0.94, "selective_copying": 0.99}  # attention at the baseline settings (the issue's)
RECURRENT_MEMORIZERS = ("hyena", "mamba")  # MAD: memorization favours these over attention
CEILING = 0.999  # accuracies this high cannot order mixers
FUZZY_RECALLERS = ("attention", "delta_net")  # MAD: the two above every other mixer on fuzzy recall
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
    return replace(grid, tasks={t: grid.tasks[t] for t in names})


def study_cells(flags, runs_dir) -> list[Cell]:
    grid = grid_of(flags)
    labels = dict((spelling, label) for label, spelling in MIXERS)
    cells = []
    for task, spec in grid.tasks.items():
        for variant in spec["variants"]:
            for mixer in mixer_list(flags.mixers, grid):
                for decay in grid.weight_decays:
                    name = f"{task}{variant_label(variant)}_{run_label(mixer).replace('+', '-')}"
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
    parser.add_argument("--tasks", default=None, help="comma list: only these of the grid's tasks (default: all)")


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
        if job.variant or not job.run.exists(names.SUMMARY):
            continue
        summary = job.run.load_json(names.SUMMARY)
        rows = [r for r in job.run.read_metrics() if r.get("eval_accuracy") is not None]
        tried = {
            "learning_rate": job.learning_rate,
            "weight_decay": job.weight_decay,
            "accuracy": summary.get("eval_accuracy"),
            "macro_accuracy": summary.get("eval_macro_accuracy"),
            "seconds": summary.get("train_seconds"),
            "curve": [[r["step"], r["eval_accuracy"], r.get("eval_macro_accuracy")] for r in rows],
        }
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


def _kendall(a: list[float], b: list[float]) -> float:
    """Kendall's τ-a of two equally long lists (ties count 0)."""
    pairs = [(i, j) for i in range(len(a)) for j in range(i + 1, len(a))]
    score = sum(np.sign(a[i] - a[j]) * np.sign(b[i] - b[j]) for i, j in pairs)
    return float(score / len(pairs)) if pairs else float("nan")


def orderings(tasks: dict) -> dict:
    """Per task: the five MAD models' ranking by ours and by MAD's score, and Kendall's τ."""
    out = {}
    for task, cells in tasks.items():
        shared = [m for m in MAD_SCORES if m in cells and cells[m]["macro_accuracy"] is not None]
        if len(shared) < 2:
            continue
        ours = [cells[m]["macro_accuracy"] for m in shared]
        paper = [MAD_SCORES[m][task] for m in shared]
        out[task] = {
            "models": shared,
            "ours": ours,
            "mad": paper,
            "tau": _kendall(ours, paper),
            "ours_order": [m for _, m in sorted(zip(ours, shared), reverse=True)],
            "mad_order": [m for _, m in sorted(zip(paper, shared), reverse=True)],
        }
    return out


def still_rising(curve: list) -> str:
    """The last log points' per-token accuracy in words: whether training had stopped improving."""
    if len(curve) < 3:
        return "too few log points to tell"
    (s0, a0, _), (s1, a1, _) = curve[-3], curve[-1]
    trend = "still rising" if a1 - a0 > 0.01 else "flat"
    return f"{trend}: {100 * a0:.1f} % at step {s0}, {100 * a1:.1f} % at step {s1}"


def checks(tasks: dict) -> list[dict]:
    """The issue's claims, each {claim, value, holds}, from the runs (never tuned to them)."""
    out = []
    for task, target in TARGETS.items():
        c = tasks.get(task, {}).get("attention")
        if c:
            out.append(
                {
                    "claim": f"attention reaches {target} on {TASK_LABELS[task]} (per token) at the baseline settings",
                    "value": c["accuracy"],
                    "holds": c["accuracy"] is not None and c["accuracy"] >= target,
                    "detail": still_rising(c.get("curve", [])),
                }
            )
    fuzzy = tasks.get("fuzzy_recall", {})
    if set(FUZZY_RECALLERS) <= set(fuzzy):
        others = {m: c["macro_accuracy"] for m, c in fuzzy.items() if m not in FUZZY_RECALLERS}
        top = max(others.values()) if others else float("nan")
        low = min(fuzzy[m]["macro_accuracy"] for m in FUZZY_RECALLERS)
        best_other = max(others, key=others.get) if others else "n/a"
        out.append(
            {
                "claim": "fuzzy recall: attention and DeltaNet above every other fixed-state mixer (macro)",
                "value": low - top,
                "holds": low > top,
                "detail": f"lower of the two {100 * low:.1f} against the best other ({best_other}) {100 * top:.1f}",
            }
        )
    memo = tasks.get("memorization", {})
    if "attention" in memo and all(m in memo for m in RECURRENT_MEMORIZERS):
        att = memo["attention"]["macro_accuracy"]
        low = min(memo[m]["macro_accuracy"] for m in RECURRENT_MEMORIZERS)
        saturated = min(att, low) >= CEILING
        out.append(
            {
                "claim": "memorization: Hyena and Mamba above attention (MAD: 89.5 and 89.5 against 85.2)",
                "value": low - att,
                "holds": low > att,
                "detail": f"the lower of Hyena and Mamba {100 * low:.1f} against attention {100 * att:.1f}",
                "saturated": saturated,
            }
        )
    return out


# a uniform guess among a task's target tokens (its options -> accuracy)
CHANCE = {
    "in_context_recall": lambda o: 1 / o.key_count(),  # the value tokens
    "noisy_recall": lambda o: 1 / o.key_count(),
    "fuzzy_recall": lambda o: 1 / (o.vocab_size - 1 - o.key_count()),
    "selective_copying": lambda o: 1 / (o.vocab_size - 2),  # the content tokens
    "compression": lambda o: 1 / (o.vocab_size - 1),
    "memorization": lambda o: 1 / ((o.vocab_size - 1) // 2),  # the facts' values
}


def chance_levels(run: StudyRun) -> dict:
    """{task: the accuracy of a uniform guess among its targets} at the study's (baseline) settings."""
    from src.systems.lm import LMSettings

    out = {}
    for job in run.jobs:
        if not job.variant and job.task not in out:
            out[job.task] = CHANCE[job.task](LMSettings.from_dict(job.expected).task.options)
    return out


def report(run: StudyRun) -> list:
    from plots.mad_report import write_report

    tasks = aggregate(run)
    labels = {spelling: label for label, spelling in MIXERS}
    return write_report(run, labels, tasks, checks(tasks), orderings(tasks), chance_levels(run))


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
