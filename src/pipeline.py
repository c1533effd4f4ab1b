"""The one pipeline of an attention-only run: settings -> train -> run directory -> analyses.

Runners (flags or a config file) and the job engine end in `execute`; nothing here parses
flags. The analyses that run at the end are the registered ones ("analysis" registry)
whose `applies(settings, with_attention)` holds.

    run, result = execute(settings, Path("runs/x"), overwrite=False, with_attention=True,
                          runner="runners.run_concat_inputs_targets", argv=[...])
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from src import rundir as names
from src.config import CurriculumConfig, Settings
from src.curricula import num_corrupted
from src.models.attention_only import build_model
from src.models.layouts import layout_of
from src.provenance import run_record
from src.registry import registry
from src.rundir import ATTENTION_TASKS, RunContext, RunDir
from src.tasks.regression import take_tasks
from src.train import TrainResult, make_eval_set, train

SUMMARY_METRICS = ("eval_loss", "gd_loss", "align_cos", "l2_pred_diff", "model_diff")


def summary_record(settings: Settings, result: TrainResult) -> dict:
    """metrics_summary.json: status, sizes, and the final scores (probes' included)."""
    final = result.final
    record = {
        "status": "diverged" if result.diverged else "complete",
        "message": result.diverged,
        "model": settings.model.name,
        "num_layers": settings.model.num_layers,
        "seed": settings.train.seed,
        "steps": result.steps_done,
        "steps_requested": settings.train.steps,
        "train_loss": result.history[-1]["train_loss"] if result.history else None,
        "gd_eta": result.eval_set.gd_eta,
        "train_seconds": round(result.train_seconds, 3),
        "eval_size": settings.train.eval_size,
    }
    record.update({k: final.get(k) for k in SUMMARY_METRICS})
    record.update({k: v for k, v in final.items() if k not in SUMMARY_METRICS})
    return record


def analysis_metadata(settings: Settings, eval_set, save_attention: bool) -> dict:
    n = settings.task.num_context

    def describe(c: CurriculumConfig) -> dict:
        corrupted = num_corrupted(c.noise_p, n) if c.noise_mode != "clean" else 0
        return {**c.__dict__, "num_corrupted": corrupted}
    return {
        "train_curriculum": describe(settings.train_curriculum),
        "eval_curriculum": describe(settings.eval_curriculum),
        "eval_size": settings.train.eval_size,
        "eval_seed": settings.train.eval_seed,
        "num_context": n,
        "tokens": settings.model.layout.name,
        "tokens_per_pair": layout_of(settings.model).tokens_per_pair,
        "gd_eta": eval_set.gd_eta,
        "ordering_idx": {"file": names.ORDERING, "shape": list(eval_set.ordering_idx.shape),
                         "meaning": "position p of an eval task holds its original pair ordering_idx[p]"},
        "noise_mask": {"file": names.NOISE_MASK, "shape": list(eval_set.noise_mask.shape),
                       "meaning": "True where the pair at that (new) position is corrupted",
                       "corrupted_total": int(eval_set.noise_mask.sum())},
        "attention_saved": save_attention,
        "attention_tasks": min(ATTENTION_TASKS, settings.train.eval_size) if save_attention else 0,
    }


def save_attention(run: RunDir, settings: Settings, params, eval_set) -> None:
    """attn/layer{L}_head{H}.npy [tasks, queries, keys] and attn/attention.npz for the first
    ATTENTION_TASKS eval tasks."""
    from utils_attention import capture_attention, per_head_arrays
    model = build_model(settings.task, settings.model)
    count = min(ATTENTION_TASKS, settings.train.eval_size)
    attention = capture_attention(model, params, take_tasks(eval_set.tasks, slice(0, count)))
    raw = {}
    for (layer, head), weights in per_head_arrays(attention).items():
        run.write_npy(names.attention_file(layer, head), weights)
        raw[f"layer{layer}_head{head}"] = weights
    raw["noise_mask"] = eval_set.noise_mask[:count]
    raw["ordering_idx"] = eval_set.ordering_idx[:count]
    run.write_npz(names.ATTN_RAW, raw)


def run_analyses(run: RunDir, settings: Settings, with_attention: bool) -> list[str]:
    """Every registered analysis that applies to this run, in registry order; returns names."""
    done = []
    for entry in registry("analysis"):
        if entry.is_applicable(RunContext(settings, with_attention)):
            entry.build(None)(run)
            done.append(entry.name)
    return done


def execute(settings: Settings, out: Path, *, overwrite: bool, with_attention: bool,
            runner: str, argv: Sequence[str], progress: bool = True,
            skip_analysis: bool = False) -> tuple[RunDir, TrainResult]:
    """Train and write a complete run directory. `out` must have been checked
    (RunDir.check_creatable) before any work."""
    with RunDir.create(out, overwrite=overwrite) as run:   # replaces an old run only on success
        run.write_json(names.CONFIG, run_record(settings.to_dict(), runner, argv, out))
        eval_set = make_eval_set(settings)
        run.save_eval_metadata(eval_set.ordering_idx, eval_set.noise_mask)
        run.write_json(names.METADATA, analysis_metadata(settings, eval_set, with_attention))
        logger = run.metrics_logger()
        result = train(settings, on_log=logger.log, progress=progress, eval_set=eval_set)
        run.save_params(result.params)
        if with_attention:
            save_attention(run, settings, result.params, eval_set)
        run.write_json(names.SUMMARY, summary_record(settings, result))
        if not result.diverged and not skip_analysis:
            run_analyses(run, settings, with_attention)
    return run, result
