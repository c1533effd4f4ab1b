"""The length study's configuration files as they are in its repository (Lin et al., AAAI 2025:
IKMLab/length-generalization-with-icl, configs/): `!include` composition and its layout, read
into the mechanisms paper's YAML schema that src/formats/limits_of_icl.py turns into settings.

    configs/tasks/<task>/<encoding>.yaml
        model:    !include ../../base_model/llama/standard.yaml     (src/formats/backbones.py)
        patch:    !include ../../patch/alibi/alibi.yaml             {name, rope_scaling: {type}}
        task:     {data, name, curriculum: !include ../../hyperparams/curriculum/dim-50_pts-200.yaml}
        training: !include ../../hyperparams/training_args.yaml     (Hugging Face TrainingArguments)
        wandb:    !include ../../logging/wandb.yaml

The `!include` composition lives in src/yaml_includes.py (each PATH resolved relative to the file
that holds it, nested up to 32 files deep, with a safe loader; a cycle or a missing file refused in
one line naming the file); a key we cannot honour is refused here in one line naming the key.
Training follows the study's own loop (TRAINING below), not the Trainer its keys are named after.
"""

from __future__ import annotations

from typing import Any

from src.flags import UsageError

# the study's names -> ours (one table)
TASKS = {"cnf": "cnf3", "dnf": "dnf3", "sparse_thres": "sparse_threshold"}
ENCODINGS = {"dynamic-yarn": "dynamic_yarn"}  # patch rope_scaling.type -> our position name
# The training block is Hugging Face TrainingArguments' names, but the study's train.py reads six
# of them and builds its own loop: torch's AdamW at its defaults (weight decay 0.01, β 0.9/0.999,
# ε 1e-8), a linear warm-up over warmup_ratio · max_steps then linear decay to 0, no gradient
# clipping. Onto the mechanisms schema's training keys:
TRAINING = {
    "max_steps": "train_steps",
    "learning_rate": "learning_rate",
    "per_device_train_batch_size": "batch_size",
    "warmup_ratio": "warmup_fraction",
    "save_steps": "save_every_steps",
    # Its train.py evaluates held-out prompts only after training (1,280 of them); ours
    # evaluates eval_size (1,000) at every log point, and takes that cadence from
    # eval_steps, Hugging Face's name for it (100 in its configs), and eval_size as ours.
    "eval_steps": "log_every",
    "eval_size": "eval_size",
}
# logging_steps: its train.py logs the training batch's loss every logging_steps steps; ours
# records every step's (training_log.csv), so the key sets the log points only where a config has
# no eval_steps (at 10, an evaluation of 1,000 prompts of 201 points, about 40 s on 2 cores at the
# laptop size, would follow every 25 s of training)
LOGGING = "logging_steps"
# what its loop does besides: the same here
ITS_LOOP = {"weight_decay": 0.01, "grad_clip": 0.0}
# the keys its train.py never reads (they describe a Hugging Face Trainer it does not build):
# accepted, without effect there and here
UNREAD = {
    "evaluation_strategy",
    "eval_strategy",
    "gradient_accumulation_steps",
    "eval_gradient_accumulation_steps",
    "weight_decay",
    "adam_beta1",
    "adam_beta2",
    "adam_epsilon",
    "max_grad_norm",
    "save_strategy",
    "save_total_limit",
    "metric_for_best_model",
    "per_device_eval_batch_size",
    "output_dir",
    "report_to",
    "load_best_model_at_end",
    "logging_strategy",
    "seed",
}
TOP = {"model", "patch", "task", "training", "wandb", "out_dir"}


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
    if task.get("data") not in (None, "boolean"):  # boolean tasks read ±1 inputs by definition
        training["data"] = task["data"]
    curriculum = mapping_of("task.curriculum", task.get("curriculum"))
    refuse_unknown("task.curriculum.", curriculum, {"dims", "points"})
    training["curriculum"] = {}
    for axis, schedule in curriculum.items():
        schedule = mapping_of(f"task.curriculum.{axis}", schedule)
        refuse_unknown(f"task.curriculum.{axis}.", schedule, {"start", "end", "increment", "interval"})
        training["curriculum"][axis] = {("inc" if k == "increment" else k): v for k, v in schedule.items()}
    args = mapping_of("training", raw.get("training"))
    refuse_unknown("training.", args, set(TRAINING) | UNREAD | {LOGGING})
    training.update(ITS_LOOP)
    if LOGGING in args and "eval_steps" not in args:
        training["log_every"] = args[LOGGING]
    training.update({TRAINING[k]: v for k, v in args.items() if k in TRAINING})
    out = {"model": model, "training": training}
    for key in ("out_dir", "wandb"):
        if key in raw:
            out[key] = raw[key]
    return out
