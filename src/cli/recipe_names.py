"""The ICL benchmark's own spellings on `python -m runners.recipe`: the task choices and fields of
miniseq's examples/icl_benchmark/tasks.py and the flags of its recipe.py, as one table of rewrites
applied to the command line before it is parsed. Its users type its commands; ours stay accepted.

    task:boolean --task.boolean_type T         task:T (our boolean tasks carry its names)
    task:regression --task.regression_type R   task:<REGRESSION_TYPES[R]> (default R: linear)
    task:disjoint                              task:disjoint_sets
    task:mqar                                  task:mqar

The chosen task's fields (TASKS[...].fields) and the recipe's flags (FLAGS) are renamed to ours;
`--task.random_non_queries True` is `--task.filler uniform` (random tokens of [1, V) between the
queries, keys included, as there). What the benchmark fixes differently by default (vocabulary
8,192, width 128, batch 256, random filler) stays ours unless typed: see src/cli/recipe.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from src.flags import UsageError

BOOLEAN_TYPES = (
    "dnf3",
    "cnf3",
    "int_halfspace",
    "sparse_threshold",
    "parity",
    "sparse_parity",
    "disjunction",
    "conjunction",
)
REGRESSION_TYPES = {
    "linear": "linear_regression",
    "quadratic": "quadratic_regression",
    "sparse_linear": "sparse_linear_regression",
    "noisy": "noisy_linear_regression",
    "outlier": "outlier_regression",
}
# the pair tasks' sequence: n points of dimension d (our --pairs group)
PAIR_FIELDS = {"input_seq_len": "--pairs.n_points", "input_dim": "--pairs.n_dims"}
# every task of the benchmark has eval_size (the size of its evaluation set)
COMMON_FIELDS = {"eval_size": "--train.eval_size"}


@dataclass(frozen=True)
class TaskName:
    """One of the benchmark's task choices: the field that picks our task (`selector`, with the
    task for each of its values and the value taken when it is not typed) or the one task it is,
    and its fields as our flags (renamed; `values`: a field whose each value is our flag(s))."""

    doc: str
    entries: dict[str, str]
    selector: str = ""
    default: str = ""
    fields: dict[str, str] = field(default_factory=dict)
    values: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)


TASKS = {
    "boolean": TaskName(
        "boolean functions of ±1 inputs (Bhattamishra et al.)",
        {t: t for t in BOOLEAN_TYPES},
        "boolean_type",
        fields=PAIR_FIELDS,
    ),
    "disjoint": TaskName(
        "the one token two disjoint lists share",
        {"": "disjoint_sets"},
        fields={"short_length": "--task.set_size", "long_length": "--task.long_size"},
    ),
    "mqar": TaskName(
        "multi-query associative recall (Zoology)",
        {"": "mqar"},
        fields={"input_seq_len": "--task.seq_len", "num_kv_pairs": "--task.num_pairs"},
        values={"random_non_queries": {"True": ("--task.filler", "uniform"), "False": ("--task.filler", "zero")}},
    ),
    "regression": TaskName(
        "x/y-pair regression (Garg et al.)",
        REGRESSION_TYPES,
        "regression_type",
        "linear",
        fields=PAIR_FIELDS,
        values={"renormalize_noisy": {"True": ("--task.renormalize",), "False": ("--task.no_renormalize",)}},
    ),
}
# the recipe's and its trainer's flags -> ours
FLAGS = {
    "--seed": "--train.seed",
    "--train.max_steps": "--train.train_steps",
    "--train.validate_every": "--train.log_every",
    "--train.max_grad_norm": "--train.grad_clip",
    "--train.device_batch_size": "--train.batch_size",
    "--train.micro_batch_size": "--train.batch_size",
    "--optimizer.lr": "--train.learning_rate",
    "--optimizer.weight_decay": "--train.weight_decay",
    "--lr_scheduler.warmup_ratio": "--train.warmup_fraction",
    "--model.model_dim": "--model.width",
    "--model.num_layers": "--model.n_layer",
    "--model.seq_mixer.num_heads": "--model.n_head",
}
BOOLEAN_VALUES = {"true": "True", "false": "False", "1": "True", "0": "False"}


def _tokens(argv: Sequence[str]) -> list[list[str]]:
    """argv as [flag, value] / [flag=value] / [word] groups (a flag's value is the next token
    unless it starts with '-' or is a component:choice)."""
    groups, i = [], 0
    while i < len(argv):
        token = argv[i]
        takes_value = (
            token.startswith("--")
            and "=" not in token
            and i + 1 < len(argv)
            and not argv[i + 1].startswith("-")
            and ":" not in argv[i + 1]
        )
        groups.append([token, argv[i + 1]] if takes_value else [token])
        i += 2 if takes_value else 1
    return groups


def _flag_value(group: list[str]) -> tuple[str, str | None]:
    if "=" in group[0]:
        flag, _, value = group[0].partition("=")
        return flag, value
    return group[0], group[1] if len(group) > 1 else None


def spelled_as_typed(message: str, argv: Sequence[str]) -> str:
    """A refusal of the translated command line with each renamed flag as the user typed it."""
    typed = {flag for group in _tokens(argv) for flag in [_flag_value(group)[0]] if flag.startswith("--")}
    spec = TASKS.get(_typed_task(_tokens(argv)))
    renames = FLAGS | ({f"--task.{k}": v for k, v in (*spec.fields.items(), *COMMON_FIELDS.items())} if spec else {})
    for theirs, ours in renames.items():
        if theirs in typed:
            message = message.replace(f"{ours}=", f"{theirs}=").replace(f"{ours} ", f"{theirs} ")
    return message


def _typed_task(groups: list[list[str]]) -> str:
    return next((g[0].partition(":")[2] for g in groups if g[0].startswith("task:")), "mqar")


def translate(argv: Sequence[str]) -> list[str]:
    """argv with the benchmark's choices, fields and flags spelled as ours (UsageError, one line,
    for a selector value it does not have)."""
    groups = _tokens(argv)
    where = next((i for i, g in enumerate(groups) if g[0].startswith("task:")), None)
    typed = _typed_task(groups)
    spec = TASKS.get(typed)
    if spec is None:  # one of our own names: only the recipe's flags are renamed
        return [t for g in groups for t in _renamed(g, FLAGS)]
    picked = spec.default or next(iter(spec.entries))
    if spec.selector:
        selector = f"--task.{spec.selector}"
        given = [g for g in groups if _flag_value(g)[0] == selector]
        if not given and not spec.default:
            raise UsageError(f"task:{typed} needs {selector}; accepted: {', '.join(spec.entries)}")
        if given:
            picked = _flag_value(given[-1])[1]
            if picked not in spec.entries:
                raise UsageError(f"{selector}={picked!r} is not accepted; accepted: {', '.join(spec.entries)}")
            groups = [g for g in groups if _flag_value(g)[0] != selector]
            where = next((i for i, g in enumerate(groups) if g[0].startswith("task:")), None)
    if where is not None:
        groups[where] = [f"task:{spec.entries[picked]}"]
    renames = {f"--task.{k}": v for k, v in (*spec.fields.items(), *COMMON_FIELDS.items())} | FLAGS
    out = []
    for group in groups:
        flag, value = _flag_value(group)
        field_name = flag[len("--task.") :] if flag.startswith("--task.") else ""
        if field_name in spec.values:
            table = spec.values[field_name]
            word = BOOLEAN_VALUES.get(str(value).lower(), value)
            if word not in table:
                raise UsageError(f"{flag}={value!r} is not accepted; accepted: {flag} {{{', '.join(table)}}}")
            out += table[word]
        else:
            out += _renamed(group, renames)
    return out


def _renamed(group: list[str], renames: dict[str, str]) -> list[str]:
    flag, _, value = group[0].partition("=")
    if flag not in renames:
        return group
    return [f"{renames[flag]}={value}" if "=" in group[0] else renames[flag], *group[1:]]


def describe() -> list[str]:
    """The benchmark's task choices for --choices, one line each."""
    lines = []
    for name, spec in TASKS.items():
        picks = (
            f"--task.{spec.selector} {{{','.join(spec.entries)}}}" if spec.selector else f"= task:{spec.entries['']}"
        )
        renamed = ", ".join(f"--task.{k} ({v})" for k, v in spec.fields.items())
        valued = ", ".join(
            f"--task.{k} {{{','.join(t)}}} ({' / '.join(' '.join(v) for v in t.values())})"
            for k, t in spec.values.items()
        )
        extra = "; ".join(x for x in (renamed, valued) if x)
        lines.append(f"  task:{name:20s} {spec.doc}: {picks}" + (f"; {extra}" if extra else ""))
    return lines
