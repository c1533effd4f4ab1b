"""The length study's configuration files as they are in its repository (Lin et al., AAAI 2025:
IKMLab/length-generalization-with-icl, configs/): `!include` composition and its layout, read
into the mechanisms paper's YAML schema that src/cli/gpt2.py turns into settings.

    configs/tasks/<task>/<encoding>.yaml
        model:    !include ../../base_model/llama/standard.yaml     (src/cli/backbones.py)
        patch:    !include ../../patch/alibi/alibi.yaml             {name, rope_scaling: {type}}
        task:     {data, name, curriculum: !include ../../hyperparams/curriculum/dim-50_pts-200.yaml}
        training: !include ../../hyperparams/training_args.yaml     (Hugging Face TrainingArguments)
        wandb:    !include ../../logging/wandb.yaml

`!include PATH` is resolved relative to the file that holds it, nested to any depth, with a safe
loader (no tag constructs objects; `!!python/...` is refused). A cycle, a missing file and a key we
cannot honour are refused in one line naming the key or the file. Training follows the study's
own loop (TRAINING below), not the Trainer its keys are named after.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from src.cli import UsageError

# the study's names -> ours (one table)
TASKS = {"cnf": "cnf3", "dnf": "dnf3", "sparse_thres": "sparse_threshold"}
ENCODINGS = {"dynamic-yarn": "dynamic_yarn"}     # patch rope_scaling.type -> our position name
# The training block is Hugging Face TrainingArguments' names, but the study's train.py reads six
# of them and builds its own loop: torch's AdamW at its defaults (weight decay 0.01, β 0.9/0.999,
# ε 1e-8), a linear warm-up over warmup_ratio · max_steps then linear decay to 0, no gradient
# clipping. The six, onto the mechanisms schema's training keys:
TRAINING = {"max_steps": "train_steps", "learning_rate": "learning_rate",
            "per_device_train_batch_size": "batch_size", "warmup_ratio": "warmup_fraction",
            "logging_steps": "log_every", "save_steps": "save_every_steps"}
# what its loop does besides: the same here
ITS_LOOP = {"weight_decay": 0.01, "grad_clip": 0.0}
# the keys its train.py never reads (they describe a Hugging Face Trainer it does not build):
# accepted, without effect there and here
UNREAD = {"evaluation_strategy", "eval_strategy", "gradient_accumulation_steps", "eval_gradient_accumulation_steps",
          "weight_decay", "adam_beta1", "adam_beta2", "adam_epsilon", "max_grad_norm", "save_strategy",
          "save_total_limit", "metric_for_best_model", "eval_steps", "per_device_eval_batch_size",
          "output_dir", "report_to", "load_best_model_at_end", "logging_strategy", "seed"}
TOP = {"model", "patch", "task", "training", "wandb", "out_dir"}


def load(path: str | Path) -> Any:
    """The YAML file at `path` with every `!include` resolved (UsageError, one line)."""
    return _load(Path(path), ())


def _load(path: Path, chain: tuple[Path, ...]) -> Any:
    import yaml
    resolved = path.resolve()
    if resolved in chain:
        cycle = " -> ".join(str(p) for p in (*chain[chain.index(resolved):], resolved))
        raise UsageError(f"!include cycle: {cycle}")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        where = f" (included by {chain[-1]})" if chain else ""
        raise UsageError(f"config {path}: no such file{where}") from None
    except OSError as err:
        raise UsageError(f"config {path}: cannot be read ({err.strerror})") from None
    except UnicodeDecodeError:
        raise UsageError(f"config {path}: is not a text file; accepted: a YAML config") from None

    class Loader(yaml.SafeLoader):
        """A safe loader whose `!include` reads the named file relative to this one."""

    def include(loader, node):
        target = Path(loader.construct_scalar(node))
        return _load(target if target.is_absolute() else path.parent / target, (*chain, resolved))

    Loader.add_constructor("!include", include)
    try:
        return yaml.load(text, Loader=Loader)     # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as err:
        raise UsageError(f"config {path}: not valid YAML ({' '.join(str(err).split())})") from None


def is_length_study(raw: Any) -> bool:
    """Whether a config mapping is in the length study's layout (top-level task or patch)."""
    return isinstance(raw, dict) and ("task" in raw or "patch" in raw)


def mapping_of(key: str, value) -> dict:
    """A config block as a dict (None: empty); UsageError naming `key` otherwise."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UsageError(f"{key}={value!r} is not accepted; accepted: a mapping")
    return dict(value)


def refuse_unknown(where: str, raw: dict, known) -> None:
    """UsageError naming the first key of `raw` not in `known`."""
    extra = sorted(set(raw) - set(known))
    if extra:
        raise UsageError(f"{where}{extra[0]}: unknown key; accepted: {', '.join(sorted(known))}")


def to_mechanisms_schema(raw: dict) -> dict:
    """The mechanisms paper's schema (model, training, out_dir, wandb) of a length-study config."""
    refuse_unknown("", raw, TOP)
    model = mapping_of("model", raw.get("model"))
    patch = mapping_of("patch", raw.get("patch"))
    refuse_unknown("patch.", patch, {"name", "rope_scaling"})
    scaling = mapping_of("patch.rope_scaling", patch.get("rope_scaling"))
    refuse_unknown("patch.rope_scaling.", scaling, {"type", "factor"})
    if "type" in scaling and model.get("family") != "Mamba":
        model["position"] = ENCODINGS.get(scaling["type"], scaling["type"])
    task = mapping_of("task", raw.get("task"))
    refuse_unknown("task.", task, {"data", "name", "curriculum"})
    training = {}
    if "name" in task:
        training["task"] = TASKS.get(task["name"], task["name"])
    if task.get("data") not in (None, "boolean"):           # boolean tasks read ±1 inputs by definition
        training["data"] = task["data"]
    curriculum = mapping_of("task.curriculum", task.get("curriculum"))
    refuse_unknown("task.curriculum.", curriculum, {"dims", "points"})
    training["curriculum"] = {}
    for axis, schedule in curriculum.items():
        schedule = mapping_of(f"task.curriculum.{axis}", schedule)
        refuse_unknown(f"task.curriculum.{axis}.", schedule, {"start", "end", "increment", "interval"})
        training["curriculum"][axis] = {("inc" if k == "increment" else k): v for k, v in schedule.items()}
    args = mapping_of("training", raw.get("training"))
    refuse_unknown("training.", args, set(TRAINING) | UNREAD)
    training.update(ITS_LOOP)
    training.update({TRAINING[k]: v for k, v in args.items() if k in TRAINING})
    out = {"model": model, "training": training}
    for key in ("out_dir", "wandb"):
        if key in raw:
            out[key] = raw[key]
    return out
