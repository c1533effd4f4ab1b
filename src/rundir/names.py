"""The names of the files of a run directory: the one place that knows them (SPEC §8).

runs/<exp>/
  config.json            the system, every resolved setting, the command, versions, git commit
  metrics.jsonl          one row per log point
  metrics_summary.json   status and final numbers (present <=> training finished), the outputs
  params.npz             parameters (float arrays keyed module/param; nothing pickled)
  checkpoint.npz         parameters, optimiser state and progress, for --resume
  analysis/              what the registered analyses write
  ...                    each system's own files (src/systems/<name>.py)
"""

from __future__ import annotations

CONFIG = "config.json"
METRICS = "metrics.jsonl"
SUMMARY = "metrics_summary.json"
PARAMS = "params.npz"
ORDERING = "ordering_idx.npy"
NOISE_MASK = "noise_mask.npy"
ANALYSIS = "analysis"
METADATA = f"{ANALYSIS}/analysis_metadata.json"
ALIGNMENT = f"{ANALYSIS}/alignment.json"
OOD = f"{ANALYSIS}/ood.csv"
ATTENTION_STATS = f"{ANALYSIS}/attention_stats.json"
ATTENTION_STATS_PNG = f"{ANALYSIS}/attention_stats.png"
ATTN = "attn"
ATTN_RAW = f"{ATTN}/attention.npz"
ATTENTION_TASKS = 1000  # eval tasks whose attention weights save_attention writes under attn/ (the first)
FIGS = "figs"
DYNAMICS = "dynamics.npz"  # training-dynamics runs (runners.dynamics)
DYNAMICS_JSON = f"{ANALYSIS}/dynamics.json"
DYNAMICS_PNG = f"{ANALYSIS}/dynamics.png"
LOSS_PNG = f"{FIGS}/loss.png"
ICL_CURVE_CSV = f"{ANALYSIS}/icl_curve.csv"  # runs that predict pairs (gpt2; lm on pair tasks)
ICL_CURVE_PNG = f"{ANALYSIS}/icl_curve.png"
ROBUSTNESS = f"{ANALYSIS}/robustness.json"
SHIFTS_JSON = f"{ANALYSIS}/shifts.json"  # python -m analysis.robustness --battery
LENGTH_GEN_CSV = f"{ANALYSIS}/length_gen.csv"  # python -m analysis.length_gen (Lin et al., AAAI 2025)
LENGTH_GEN_JSON = f"{ANALYSIS}/length_gen.json"
LENGTH_GEN_PNG = f"{ANALYSIS}/ood_length.png"
RECENCY_CSV = f"{ANALYSIS}/recency.csv"  # python -m analysis.recency (Lin et al., AAAI 2025)
RECENCY_JSON = f"{ANALYSIS}/recency.json"
RECENCY_PNG = f"{ANALYSIS}/avg_attention_score.png"
INDUCTION_JSON = f"{ANALYSIS}/induction.json"  # python -m analysis.induction (Olsson et al. 2022)
INDUCTION_PNG = f"{ANALYSIS}/induction_heads.png"
PROBES_JSON = f"{ANALYSIS}/probes.json"  # python -m analysis.probes (Akyürek et al., ICLR 2023)
PROBES_PNG = f"{ANALYSIS}/probes.png"
PROBES_Y_MEAN_JSON = f"{ANALYSIS}/probes_y_mean.json"  # the same, read as the mean over the y tokens (--read y_mean)
PROBES_Y_MEAN_PNG = f"{ANALYSIS}/probes_y_mean.png"
PROBES_LAST_Y_JSON = f"{ANALYSIS}/probes_last_y.json"  # the same, read at the last context pair's y token
PROBES_LAST_Y_PNG = f"{ANALYSIS}/probes_last_y.png"
ALGORITHM_SELECTION_JSON = f"{ANALYSIS}/algorithm_selection.json"  # analysis.algorithm_selection (Bai et al.)
PROMPT_TESTS_JSON = f"{ANALYSIS}/prompt_tests.json"  # python -m analysis.prompt_tests (Lin et al., AAAI 2025)
DUPLICATION_PNG = f"{ANALYSIS}/duplication.png"
SERIAL_POSITION_PNG = f"{ANALYSIS}/lost_in_mid.png"
INDUCTIVE_BIAS_JSON = f"{ANALYSIS}/inductive_bias.json"  # analysis.inductive_bias (Lin et al., AAAI 2025)
INDUCTIVE_BIAS_PNG = f"{ANALYSIS}/baseline_all_dup.png"
CHECKPOINT = "checkpoint.npz"
TRAINING_LOG = "training_log.csv"
# Written first into every run directory this code creates; with a readable config.json it is
# the proof `RunDir.create(..., overwrite=True)` needs before it deletes anything.
MARKER = ".icl_run"
MARKER_TEXT = "run directory of the in-context learning workbench (src/rundir.py)\n"
STAGING = ".staging-"  # .<name>.staging-<pid>: a replacement being trained
REPLACED = ".replaced-"  # .<name>.replaced-<pid>: the old run during the swap
KEPT = ".replacement"  # .<name>.replacement: an interrupted replacement with its checkpoint, to resume


def analysis_module(name: str) -> str | None:
    """The analysis module that writes file `name` of a run, or None (training writes it): read
    from the registered analyses' `files` (analysis/common.py register_analysis), the one list."""
    from fnmatch import fnmatchcase
    from src.registry import registry

    if name.startswith(f"{FIGS}/attention_"):  # a plot of the saved attention, not an analysis
        return "plots.attention_quick"
    for entry in registry("analysis"):
        analysis = entry.build(None)
        if any(fnmatchcase(name, pattern) for pattern in analysis.files):
            return analysis.module
    return None


def training_flag(name: str) -> str | None:
    """The flag the training command needs to write file `name` (the von Oswald runners write
    attn/ only with --save_attention), or None."""
    return "--save_attention" if name.startswith(f"{ATTN}/") else None


def attention_file(layer: int, head: int) -> str:
    return f"{ATTN}/layer{layer}_head{head}.npy"


def attention_figure(layer: int, head: int) -> str:
    """The quick heatmap of one layer/head (plots.attention_quick)."""
    return f"{FIGS}/attention_layer{layer}_head{head}.png"


def kept_checkpoint(step: int) -> str:
    """A checkpoint kept at `step` (keep_every) besides the latest one."""
    return f"checkpoint_{step}.npz"
