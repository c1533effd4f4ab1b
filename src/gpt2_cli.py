"""The command line of seed 000's system: `python -m runners.train --config FILE.yaml
[--set key=value ...] [--resume] [--choices]`, reading the seed's YAML schema with a safe
loader (yaml.safe_load: no object construction from the file).

    model:    family (gpt2 | nanogpt), n_dims, n_embd, n_head, n_layer, n_positions,
              attention_type (a seq_mixer), attention_kwargs (its options)
    training: batch_size, learning_rate, train_steps, save_every_steps, keep_every_steps,
              task, task_kwargs, data, num_tasks, num_training_examples,
              curriculum: {dims, points: {start, end, inc, interval}}
    out_dir, test_run (true: 100 steps, small eval — a smoke run in seconds)

Every key is checked before any work (one line: the key, the value, what is accepted; exit 2).
The run directory (out_dir) holds the contract files plus the seed's training_log.csv (step,
loss, n_points, n_dims) and <attention_type>_loss.png, and checkpoint.npz (parameters,
optimiser state, step) every save_every_steps (kept copies at keep_every_steps);
`--resume` continues a killed run from its checkpoint, bit-identically.
"""
from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from src import rundir as names
from src.bounds import check_memory, check_sizes, training_bytes
from src.cli import OneLineParser, PrintChoices, UsageError, fail
from src.models.backbone import GPT2Config
from src.provenance import run_record
from src.registry import Choice, UnknownChoice, registry
from src.rundir import RunDir, RunDirError, interrupted_note, will_replace
from src.seq_train import (POINT_ERRORS, SeqSettings, SeqTrainConfig, sampler, task_labels, train,
                           tree_from_npz, tree_to_npz)
from src.tasks.garg import Curriculum, Schedule

PROG = "python -m runners.train"
FAMILIES = ("gpt2", "nanogpt")        # seed 000 names both; they are one family here
MODEL_KEYS = {"family", "n_dims", "n_embd", "n_head", "n_layer", "n_positions", "attention_type",
              "attention_kwargs", "position", "position_kwargs"}
TRAINING_KEYS = {"batch_size", "learning_rate", "train_steps", "save_every_steps", "keep_every_steps",
                 "task", "task_kwargs", "data", "num_tasks", "num_training_examples", "curriculum",
                 "log_every", "eval_size", "seed"}
TOP_KEYS = {"model", "training", "out_dir", "test_run", "wandb", "inherit"}
CHECKPOINT, TRAINING_LOG = names.CHECKPOINT, names.TRAINING_LOG


def _int(key: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise UsageError(f"{key}={value!r} is not accepted; accepted: an integer >= {low}")
    return value


def _number(key: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value <= 0:
        raise UsageError(f"{key}={value!r} is not accepted; accepted: a finite number > 0")
    return float(value)


def _mapping(key: str, value) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UsageError(f"{key}={value!r} is not accepted; accepted: a mapping")
    return value


def _unknown(where: str, raw: dict, known: set) -> None:
    extra = sorted(set(raw) - known)
    if extra:
        raise UsageError(f"{where}{extra[0]}: unknown key; accepted: {', '.join(sorted(known))}")


def _schedule(key: str, raw) -> Schedule:
    raw = _mapping(key, raw)
    _unknown(f"{key}.", raw, {"start", "end", "inc", "interval"})
    s = Schedule(**{k: _int(f"{key}.{k}", raw[k], 1) for k in ("start", "end") if k in raw},
                 **{k: _int(f"{key}.{k}", raw[k], 0 if k == "inc" else 1)
                    for k in ("inc", "interval") if k in raw}) if raw else None
    if s is None or "start" not in raw or "end" not in raw:
        raise UsageError(f"{key}={raw!r} is not accepted; accepted: a mapping with start, end, inc, interval")
    if s.end < s.start:
        raise UsageError(f"{key}.end={s.end} is below {key}.start={s.start}; accepted: end >= start")
    return s


def _options(kind: str, name: str, kwargs: dict, key: str) -> Choice:
    try:
        entry = registry(kind).get(name)
    except UnknownChoice as err:
        raise UsageError(f"{key}={name!r} is unknown; accepted: {', '.join(registry(kind).names())}") from err
    try:
        return Choice(name, entry.options_from_dict(kwargs))
    except (UnknownChoice, TypeError) as err:
        raise UsageError(f"{key.rsplit('.', 1)[0]}: {err}") from None


def _family_tasks() -> list[str]:
    """The tasks this family trains on: those whose options say how they are scored."""
    return [e.name for e in registry("task") if getattr(e.options, "labels", None) in ("real", "sign")]


def settings_from_config(raw: Any) -> tuple[SeqSettings, Path, bool]:
    """(settings, out_dir, test_run) from the seed's YAML mapping; UsageError on a bad key."""
    if not isinstance(raw, dict):
        raise UsageError(f"the config is a {type(raw).__name__}, not a mapping; accepted: a YAML "
                         "mapping with model, training, out_dir")
    _unknown("", raw, TOP_KEYS)
    model, training = _mapping("model", raw.get("model")), _mapping("training", raw.get("training"))
    _unknown("model.", model, MODEL_KEYS)
    _unknown("training.", training, TRAINING_KEYS)
    family = model.get("family", "gpt2")
    if family not in FAMILIES:
        raise UsageError(f"model.family={family!r} is unknown; accepted: {', '.join(FAMILIES)}")
    curriculum = _mapping("training.curriculum", training.get("curriculum"))
    _unknown("training.curriculum.", curriculum, {"dims", "points"})
    dims = _schedule("training.curriculum.dims", curriculum.get("dims", {"start": 5, "end": 5}))
    points = _schedule("training.curriculum.points", curriculum.get("points", {"start": 11, "end": 11}))
    n_dims = _int("model.n_dims", model.get("n_dims", dims.end), 1)
    if n_dims != dims.end:
        raise UsageError(f"model.n_dims={n_dims} differs from training.curriculum.dims.end="
                         f"{dims.end}; accepted: the same dimension")
    n_positions = _int("model.n_positions", model.get("n_positions", points.end), 1)
    if n_positions < points.end:
        raise UsageError(f"model.n_positions={n_positions} is too small for "
                         f"training.curriculum.points.end={points.end}; accepted: >= {points.end}")
    n_embd, n_head = _int("model.n_embd", model.get("n_embd", 64), 1), _int("model.n_head", model.get("n_head", 4), 1)
    if n_embd % n_head:
        raise UsageError(f"model.n_embd={n_embd} is not divisible by model.n_head={n_head}; accepted: a multiple")
    mixer = _options("seq_mixer", model.get("attention_type", "softmax_causal"),
                     _mapping("model.attention_kwargs", model.get("attention_kwargs")),
                     "model.attention_type")
    position = _options("position", model.get("position", "learned"),
                        _mapping("model.position_kwargs", model.get("position_kwargs")), "model.position")
    try:   # the encoding's own checks (a YaRN scale) and whether the mixer can take it
        encoding = registry("position").get(position.name).build(position.options,
                                                                  trained_tokens=2 * n_positions)
        if not getattr(registry("seq_mixer").get(mixer.name).build, "takes_any_position", False):
            encoding.require_plain(mixer.name)
    except ValueError as err:
        raise UsageError(str(err)) from None
    task_kwargs = dict(_mapping("training.task_kwargs", training.get("task_kwargs")))
    task_name = training.get("task", "linear_regression")
    task = _options("task", task_name, {}, "training.task")
    labels = getattr(task.options, "labels", None)
    if labels not in ("real", "sign"):
        raise UsageError(f"training.task={task_name!r} is not a task of this family; accepted: "
                         f"{', '.join(_family_tasks())}")
    if training.get("data") is not None:   # boolean tasks draw ±1 inputs whatever it says
        if training["data"] not in ("gaussian", "uniform"):
            raise UsageError(f"training.data={training['data']!r} is unknown; accepted: gaussian, uniform")
        if labels == "real":
            task_kwargs["data"] = training["data"]
    task = _options("task", task_name, task_kwargs, "training.task")
    if labels == "sign" and dims.start != dims.end:
        raise UsageError(f"training.curriculum.dims={dims.start}->{dims.end} is a dimension curriculum; "
                         f"the boolean task {task_name!r} takes a fixed dimension; accepted: "
                         f"dims.start = dims.end")
    for key in ("num_tasks", "num_training_examples"):
        if training.get(key) is not None:
            raise UsageError(f"training.{key}={training[key]!r} is not supported (fresh tasks every "
                             "step); accepted: null")
    test_run = bool(raw.get("test_run", False))
    defaults = SeqTrainConfig()
    tr = SeqTrainConfig(
        batch_size=_int("training.batch_size", training.get("batch_size", defaults.batch_size), 1),
        learning_rate=_number("training.learning_rate", training.get("learning_rate", defaults.learning_rate)),
        train_steps=_int("training.train_steps", training.get("train_steps", defaults.train_steps), 1),
        log_every=_int("training.log_every", training.get("log_every", defaults.log_every), 1),
        save_every_steps=_int("training.save_every_steps",
                              training.get("save_every_steps", defaults.save_every_steps), 1),
        keep_every_steps=_int("training.keep_every_steps", training.get("keep_every_steps") or 0, 0),
        eval_size=_int("training.eval_size", training.get("eval_size", defaults.eval_size), 1),
        seed=_int("training.seed", training.get("seed", 0), 0))
    n_layer = _int("model.n_layer", model.get("n_layer", 3), 1)
    try:   # the shared integer ranges and the memory estimate (src/bounds.py), before any work
        check_sizes(("d", "model.n_dims", n_dims), ("width", "model.n_embd", n_embd),
                    ("heads", "model.n_head", n_head), ("layers", "model.n_layer", n_layer),
                    ("points", "model.n_positions", n_positions),
                    ("batch_size", "training.batch_size", tr.batch_size),
                    ("eval_size", "training.eval_size", tr.eval_size),
                    ("steps", "training.train_steps", tr.train_steps), ("seed", "training.seed", tr.seed))
        check_memory(training_bytes(batch_size=tr.batch_size, eval_size=tr.eval_size,
                                    tokens=2 * n_positions, width=n_embd,
                                    layers=n_layer, heads=n_head), "this run")
    except ValueError as err:
        raise UsageError(str(err)) from None
    if test_run:
        tr = dataclasses.replace(tr, train_steps=min(tr.train_steps, 100), log_every=min(tr.log_every, 50),
                                 eval_size=min(tr.eval_size, 200), save_every_steps=min(tr.save_every_steps, 50))
    config = GPT2Config(n_dims=n_dims, n_embd=n_embd, n_head=n_head,
                        n_layer=n_layer,
                        n_positions=n_positions, mixer=mixer, position=position)
    out = Path(str(raw.get("out_dir") or f"runs/gpt2_{mixer.name}"))
    settings = SeqSettings(model=config, task=task, curriculum=Curriculum(dims, points), train=tr)
    try:   # the task's own checks at this shape (k <= d, ...), traced without drawing anything
        import jax
        jax.eval_shape(lambda key: sampler(settings)(key, 1, dims.end, points.end), jax.random.key(0))
    except ValueError as err:
        raise UsageError(f"training.task_kwargs: {err}") from None
    return settings, out, test_run


def apply_sets(raw: dict, assignments: Sequence[str]) -> dict:
    """--set training.learning_rate=3e-4 on the YAML mapping (values parsed as YAML scalars)."""
    import yaml
    for item in assignments:
        path, eq, text = item.partition("=")
        if not eq or not path:
            raise UsageError(f"--set {item!r} is not accepted; accepted: KEY=VALUE, e.g. training.train_steps=500")
        node = raw
        keys = path.split(".")
        for key in keys[:-1]:
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                raise UsageError(f"--set {item!r}: {key} is not a mapping")
        node[keys[-1]] = yaml.safe_load(text)
    return raw


def write_training_log(run: RunDir, rows: list[dict]) -> None:
    lines = ["step,loss,n_points,n_dims"] + [f"{r['step']},{r['loss']!r},{r['n_points']},{r['n_dims']}"
                                             for r in rows]
    run.write_text(TRAINING_LOG, "\n".join(lines) + "\n")


def loss_figure(rows: list[dict], title: str):
    from plots.style import new_figure
    fig = new_figure(6.5, 4, constrained=True)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot([r["step"] for r in rows], [r["loss"] for r in rows], lw=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel("training loss: MSE over the scored points")
    ax.set_title(title, fontsize=9)
    return fig


def resolve(args) -> tuple[SeqSettings, Path]:
    """(settings, run directory) from --config, --set and --out (UsageError, one line)."""
    import yaml
    try:
        with open(args.config) as handle:
            raw = yaml.safe_load(handle)
    except OSError as err:
        raise UsageError(f"--config {args.config}: cannot be read ({err.strerror})") from None
    except yaml.YAMLError as err:
        raise UsageError(f"--config {args.config}: not valid YAML ({str(err).splitlines()[0]})") from None
    if isinstance(raw, dict):
        raw = apply_sets(raw, args.sets)
    settings, out, _ = settings_from_config(raw)
    return settings, Path(args.out) if args.out else out


def settings_from_argv(argv: Sequence[str]) -> SeqSettings:
    """The settings `python -m runners.train ARGV` resolves (for the job engine)."""
    return resolve(build_parser().parse_args(list(argv)))[0]


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the seed's YAML config, e.g. configs/dummy.yaml")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key by its dotted path (repeatable)")
    parser.add_argument("--out", default=None, help="run directory (overrides the config's out_dir)")
    parser.add_argument("--resume", action="store_true", help="continue out_dir from its checkpoint")
    parser.add_argument("--overwrite", action="store_true", help="replace out_dir if it is one of our runs")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--choices", action=PrintChoices)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    try:
        settings, out = resolve(args)
        run = None
        if args.resume:
            run = RunDir(out)
            if not (run.is_ours() and run.exists(CHECKPOINT)):
                raise UsageError(f"--resume: {out} has no checkpoint of ours; accepted: the out_dir of "
                                 "a run started by python -m runners.train")
        else:
            RunDir.check_creatable(out, args.overwrite)
    except (UsageError, RunDirError) as err:
        return fail(PROG, err)
    replacing = run is None and will_replace(out)
    try:
        return execute(settings, out, run, args, argv)
    except KeyboardInterrupt:
        note = interrupted_note(out, replacing) if replacing else (
            f"interrupted: {out} keeps its last checkpoint; continue with --resume")
        print("\n" + note, file=sys.stderr)
        return 130


def execute(settings: SeqSettings, out: Path, run: RunDir | None, args, argv) -> int:
    from src.seq_train import init_state, make_model, make_optimizer
    start, log_rows, history = None, [], []
    if run is None:
        run = RunDir.create(out, overwrite=args.overwrite)
        run.write_json(names.CONFIG, run_record(settings.to_dict(), "runners.train", argv, out))
    else:
        stored = SeqSettings.from_dict(run.load_config()["settings"])
        model, optimizer = make_model(stored), make_optimizer(stored)
        params, _, opt_state = init_state(stored, model, optimizer)
        with np.load(run.file(CHECKPOINT), allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
        start = (int(arrays["step"]), tree_from_npz("params", params, arrays),
                 tree_from_npz("opt_state", opt_state, arrays))
        settings = stored
        history = run.read_metrics() if run.exists(names.METRICS) else []
        history = [r for r in history if r["step"] <= start[0]]
        log_rows = [r for r in _read_log(run) if r["step"] <= start[0]]
    try:     # a replacement (--overwrite) is written beside the old run, swapped in on success
        result, final = _train_into(run, settings, start, log_rows, history, out, args)
    except BaseException:
        run.discard()
        raise
    run.commit()
    name = settings.model.mixer.name
    print(f"{name}: {result['step']} steps in {result['seconds']:.1f}s | eval error at the last point "
          f"{final.get('eval_error_last', float('nan')):.4f} -> {run.path}")
    return 1 if result["diverged"] else 0


def _train_into(run: RunDir, settings: SeqSettings, start, log_rows: list, history: list, out: Path,
                args) -> tuple[dict, dict]:
    """Train (from `start` when resuming) and write every output into `run`."""
    from plots.style import png_bytes
    from src.pipeline import run_analyses
    import jax
    logger = run.metrics_logger()
    logger.rows = list(history)
    keep = settings.train.keep_every_steps

    def checkpoint(step, params, opt_state, rows):
        arrays = {"step": np.asarray(step), **tree_to_npz("params", params),
                  **tree_to_npz("opt_state", opt_state)}
        write_training_log(run, log_rows + rows)     # the log up to the checkpoint's step
        run.write_npz(CHECKPOINT, arrays)
        if keep and step % keep == 0:
            run.write_npz(f"checkpoint_{step}.npz", arrays)

    result = train(settings, start=start, on_log=lambda row: (logger.log(row), None if args.quiet else
                                                              print(f"  step {row['step']}: eval error "
                                                                    f"(last point) {row['eval_error_last']:.4f}",
                                                                    file=sys.stderr)),
                   on_checkpoint=checkpoint)
    log_rows += result["training_log"]
    run.save_params({"model": {"/".join(map(str, k)): v for k, v in _flat(result["params"]).items()}})
    write_training_log(run, log_rows)
    name = settings.model.mixer.name
    run.write_bytes(f"{name}_loss.png", png_bytes(loss_figure(log_rows, f"{out.name}: {name}")))
    final = result["history"][-1] if result["history"] else {}
    labels = task_labels(settings)     # regression tasks also get the robustness stresses
    run.write_json(names.SUMMARY, {
        "status": "diverged" if result["diverged"] else "complete", "message": result["diverged"],
        "system": "gpt2", "model": name, "task": settings.task.name, "steps": result["step"],
        "train_seconds": round(result["seconds"], 3), **{k: v for k, v in final.items() if k != "step"},
        "error_metric": POINT_ERRORS[labels][1],
        "outputs": [names.CONFIG, names.METRICS, names.SUMMARY, names.PARAMS, CHECKPOINT, TRAINING_LOG,
                    f"{name}_loss.png", names.ICL_CURVE_CSV, names.ICL_CURVE_PNG]
                   + ([names.ROBUSTNESS] if labels == "real" else [])})
    if not result["diverged"]:
        run_analyses(run, settings, with_attention=False)
    jax.block_until_ready(result["params"])
    return result, final


def _flat(tree) -> dict:
    import jax
    return {tuple(getattr(k, "key", getattr(k, "name", k)) for k in path): np.asarray(leaf)
            for path, leaf in jax.tree_util.tree_leaves_with_path(tree)}


def _read_log(run: RunDir) -> list[dict]:
    if not run.exists(TRAINING_LOG):
        return []
    rows = run.file(TRAINING_LOG).read_text().strip().splitlines()[1:]
    out = []
    for line in rows:
        step, loss, points, dims = line.split(",")
        out.append({"step": int(step), "loss": float(loss), "n_points": int(points), "n_dims": int(dims)})
    return out

