"""Seed 001's command line, `python -m runners.recipe` (the seed's `uv run recipe.py`), built with
tyro from the settings dataclasses and the registries:

    python -m runners.recipe --choices
    python -m runners.recipe task:mqar model.seq_mixer:attention model.state_mixer:mlp --help
    python -m runners.recipe wandb:None task:mqar model.seq_mixer:attention model.state_mixer:mlp
    python -m runners.recipe task:mqar model.seq_mixer:gated_linear_attn --task.num_pairs 16 \\
        --model.width 32 --train.train_steps 500 --out runs/recipe_gla

`<component>:<name>` picks a registry entry (task, model.seq_mixer, model.state_mixer); dotted
flags override any option (`--task.num_pairs 4`, `--model.seq_mixer.feature_map relu`,
`--train.learning_rate 3e-3`). `wandb:<anything>` is accepted and ignored: we log locally
(metrics.jsonl), and say so once. Choices and flags are checked before any work (one line,
exit 2); so are the task's sizes (κ against the vocabulary, T against 2κ + queries).
"""

import dataclasses
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Sequence, Union

import numpy as np

from src.cli import UsageError, fail
from src.models.lm import LMConfig
from src.provenance import run_record
from src.recipe_train import KINDS, PairShape, RecipeSettings, RecipeTrain
from src.registry import Choice, registry
from src.rundir import RunDir, RunDirError, interrupted_note, will_replace

PROG = "python -m runners.recipe"
COMPONENTS = {"task": "task", "model.seq_mixer": "seq_mixer", "model.state_mixer": "state_mixer"}
SEQ_MIXERS = ("attention", "linear_attention", "gated_linear_attn")
STATE_MIXERS = ("mlp", "glu", "swiglu")
# The defaults: the seed's recipe (T = 64, κ = 8, 2 layers, MLP) at a size that trains on 2 CPU
# cores (vocabulary 256 instead of 8,192, width 64 with 4 heads instead of 128 with 8).
DEFAULT_TASK = {"mqar": {"vocab_size": 256}}
EXAMPLES = "examples.json"


def recipe_tasks() -> list[str]:
    """Tasks the `lm` family trains on: token, boolean and regression tasks."""
    return [e.name for e in registry("task") if getattr(e.options, "labels", None) in KINDS]


def _variant(kind: str, name: str) -> type:
    """A frozen dataclass named `name` with the entry's options as fields (tyro's subcommand)."""
    entry = registry(kind).get(name)
    cls = type(name, (entry.options,), {"__doc__": entry.doc, "__module__": __name__})
    return dataclass(frozen=True)(cls)


def _union(kind: str, names: Sequence[str]):
    import tyro
    variants = {n: _variant(kind, n) for n in names}
    defaults = {n: v(**DEFAULT_TASK.get(n, {})) if kind == "task" else v() for n, v in variants.items()}
    typ = Union[tuple(Annotated[v, tyro.conf.subcommand(n, default=defaults[n])] for n, v in variants.items())]
    return typ, variants, defaults


def build_cli_types():
    """(the tyro root dataclass, {component: {name: variant class}})."""
    task_t, tasks, task_defaults = _union("task", recipe_tasks())
    seq_t, seqs, seq_defaults = _union("seq_mixer", SEQ_MIXERS)
    state_t, states, state_defaults = _union("state_mixer", STATE_MIXERS)

    @dataclass(frozen=True)
    class Model:
        """the `lm` family (src/models/lm.py)"""
        seq_mixer: seq_t = seq_defaults["attention"]
        state_mixer: state_t = state_defaults["mlp"]
        width: int = 64
        n_layer: int = 2
        n_head: int = 4

    @dataclass(frozen=True)
    class Recipe:
        """seed 001's recipe: train an `lm` on an in-context task, report accuracy"""
        task: task_t = task_defaults["mqar"]
        model: Model = field(default_factory=Model)
        train: RecipeTrain = field(default_factory=RecipeTrain)
        pairs: PairShape = field(default_factory=PairShape)
        out: str = "runs/recipe"
        overwrite: bool = False
        quiet: bool = False

    return Recipe, {"task": tasks, "model.seq_mixer": seqs, "model.state_mixer": states}


def check_argv(argv: Sequence[str], variants: dict) -> tuple[list[str], list[str]]:
    """(argv for tyro, notes). One-line UsageError for an unknown component, choice or flag."""
    chosen = {"task": "mqar", "model.seq_mixer": "attention", "model.state_mixer": "mlp"}
    kept, notes = [], []
    for token in argv:
        if ":" in token and not token.startswith("-"):
            component, _, name = token.partition(":")
            if component == "wandb":
                notes.append(f"{token}: accepted and ignored (we log locally: metrics.jsonl)")
                continue
            if component not in variants:
                raise UsageError(f"{token!r}: unknown component {component!r}; accepted: "
                                 f"{', '.join(list(variants) + ['wandb'])}")
            if name not in variants[component]:
                raise UsageError(f"{component}:{name} is unknown; accepted: {', '.join(variants[component])}")
            chosen[component] = name
        kept.append(token)
    types = {"--out": "str", "--help": None, "-h": None, "--overwrite": None, "--quiet": None,
             "--no_overwrite": None, "--no_quiet": None}
    types |= {f"--train.{f.name}": f.type for f in dataclasses.fields(RecipeTrain)}
    types |= {f"--pairs.{f.name}": f.type for f in dataclasses.fields(PairShape)}
    types |= {f"--model.{n}": "int" for n in ("width", "n_layer", "n_head")}
    for component, name in chosen.items():
        types |= {f"--{component}.{f.name}": f.type for f in dataclasses.fields(variants[component][name])}
    accepted = ", ".join(sorted(t for t in types if t.startswith("--")))
    i = 0
    while i < len(kept):
        token = kept[i]
        i += 1
        if not token.startswith("-"):
            continue
        flag, has_value, value = token.partition("=")
        if flag not in types:
            raise UsageError(f"{flag} is not an option of {' '.join(f'{c}:{n}' for c, n in chosen.items())}; "
                             f"accepted: {accepted}")
        kind = _type_name(types[flag])
        if kind is None:
            continue
        if not has_value:
            if i >= len(kept):
                raise UsageError(f"{flag} needs a value; accepted: {flag} <{kind}>")
            value, i = kept[i], i + 1
        if not _parses(value, kind):
            raise UsageError(f"{flag}={value!r} is not a{'n' if kind == 'int' else ''} {kind}; accepted: {flag} <{kind}>")
    return kept, notes


def _type_name(annotation) -> str | None:
    name = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    return {"int": "int", "float": "float", "str": "str"}.get(name)


def _parses(value: str, kind: str) -> bool:
    try:
        {"int": int, "float": float, "str": str}[kind](value)
        return True
    except ValueError:
        return False


def to_settings(parsed) -> tuple[RecipeSettings, Path, bool, bool]:
    """(settings, out, overwrite, quiet) from tyro's result; UsageError for sizes that cannot work."""
    def choice_of(kind, value):
        entry = registry(kind).get(type(value).__name__)
        return Choice(entry.name, entry.options(**{f.name: getattr(value, f.name)
                                                   for f in dataclasses.fields(entry.options)}))
    task = choice_of("task", parsed.task)
    seq, state = choice_of("seq_mixer", parsed.model.seq_mixer), choice_of("state_mixer", parsed.model.state_mixer)
    for where, options in (("task", task.options), ("model.seq_mixer", seq.options)):
        try:
            if hasattr(options, "check"):
                options.check()
        except ValueError as err:
            raise UsageError(f"--{where}.{err}") from None
    m, tr, pairs = parsed.model, parsed.train, parsed.pairs
    if m.width % m.n_head or (m.width // m.n_head) % 2:
        raise UsageError(f"--model.width={m.width} and --model.n_head={m.n_head}: accepted: a width that is an "
                         "even multiple of the heads")
    for flag, value, low in (("--model.width", m.width, 1), ("--model.n_layer", m.n_layer, 1),
                             ("--train.batch_size", tr.batch_size, 1), ("--train.train_steps", tr.train_steps, 1),
                             ("--train.log_every", tr.log_every, 1), ("--train.eval_size", tr.eval_size, 1),
                             ("--pairs.n_points", pairs.n_points, 1), ("--pairs.n_dims", pairs.n_dims, 1)):
        if value < low:
            raise UsageError(f"{flag}={value}; accepted: an integer >= {low}")
    if not (tr.learning_rate > 0 and tr.grad_clip > 0 and 0 <= tr.warmup_fraction < 1):
        raise UsageError(f"--train.learning_rate={tr.learning_rate}, --train.grad_clip={tr.grad_clip}, "
                         f"--train.warmup_fraction={tr.warmup_fraction}: accepted: positive rates, warm-up in [0, 1)")
    labels = task.options.labels
    if labels == "token":
        length, vocab = task.options.tokens(), task.options.vocab_size
    else:
        length, vocab = 2 * pairs.n_points, LMConfig.vocab_size
        k = getattr(task.options, "k", None)
        if k is not None and labels == "sign" and not 1 <= k <= pairs.n_dims:
            raise UsageError(f"--task.k={k} is out of range for --pairs.n_dims={pairs.n_dims}; accepted: 1..{pairs.n_dims}")
    model = LMConfig(width=m.width, n_layer=m.n_layer, n_head=m.n_head, max_len=length, vocab_size=vocab,
                     n_dims=pairs.n_dims, inputs=KINDS[labels].inputs, seq_mixer=seq, state_mixer=state)
    return RecipeSettings(task=task, model=model, train=tr, pairs=pairs), Path(parsed.out), parsed.overwrite, parsed.quiet


def parse(argv: Sequence[str]) -> tuple[RecipeSettings, Path, bool, bool, list[str]]:
    import tyro
    root, variants = build_cli_types()
    kept, notes = check_argv(argv, variants)
    parsed = tyro.cli(root, args=kept, prog=PROG, use_underscores=True,
                      config=(tyro.conf.CascadeSubcommandArgs,))
    return (*to_settings(parsed), notes)


def print_choices() -> None:
    for component, kind in COMPONENTS.items():
        names = recipe_tasks() if kind == "task" else (SEQ_MIXERS if kind == "seq_mixer" else STATE_MIXERS)
        print(f"{component} choices:")
        for name in names:
            print(f"  {component}:{name:22s} {registry(kind).get(name).doc}")
    print("wandb choices: wandb:None, wandb:on (accepted and ignored: we log locally)")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--choices" in argv:
        print_choices()
        return 0
    try:
        settings, out, overwrite, quiet, notes = parse(argv)
        RunDir.check_creatable(out, overwrite)
    except (UsageError, RunDirError) as err:
        return fail(PROG, err)
    for note in notes[:1]:
        print(f"{PROG}: {note}", file=sys.stderr)
    replacing = will_replace(out)
    try:
        return execute(settings, out, overwrite, quiet, argv)
    except KeyboardInterrupt:
        print("\n" + interrupted_note(out, replacing), file=sys.stderr)
        return 130


def execute(settings: RecipeSettings, out: Path, overwrite: bool, quiet: bool, argv) -> int:
    from src import rundir as names
    from src.recipe_train import decoded_examples, train
    from src.models.lm import parameter_count
    with RunDir.create(out, overwrite=overwrite) as run:
        run.write_json(names.CONFIG, run_record(settings.to_dict(), "runners.recipe", argv, out))
        logger = run.metrics_logger()

        def log(row):
            logger.log(row)
            if not quiet:
                metric = "accuracy" if "eval_accuracy" in row else "error"
                print(f"  step {row['step']}: loss {row['eval_loss']:.4f}, {metric} {row[f'eval_{metric}']:.4f}",
                      file=sys.stderr)
        result = train(settings, on_log=log)
        run.save_params(result["params"])
        run.write_json(EXAMPLES, decoded_examples(settings, result["model"], result["params"], result["evaluation"]))
        final = result["history"][-1] if result["history"] else {}
        run.write_json(names.SUMMARY, {
            "status": "diverged" if result["diverged"] else "complete", "message": result["diverged"],
            "system": "recipe", "task": settings.task.name, "seq_mixer": settings.model.seq_mixer.name,
            "state_mixer": settings.model.state_mixer.name, "steps": result["step"],
            "parameters": parameter_count(result["params"]), "train_seconds": round(result["seconds"], 3),
            **{k: v for k, v in final.items() if k != "step"},
            f"{KINDS[settings.task.options.labels].metric}_by_position": [None if not np.isfinite(a) else round(float(a), 6)
                                     for a in result["final_accuracy_by_position"]],
            "outputs": [names.CONFIG, names.METRICS, names.SUMMARY, names.PARAMS, EXAMPLES]})
    print(f"{settings.task.name} / {settings.model.seq_mixer.name} / {settings.model.state_mixer.name}: "
          f"{result['step']} steps in {result['seconds']:.1f}s | " + ", ".join(
              f"{k[5:]} {v:.4f}" for k, v in final.items() if k in ("eval_accuracy", "eval_error")) + f" -> {out}")
    return 1 if result["diverged"] else 0

