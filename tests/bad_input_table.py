"""The bad-input probe's table (tests/test_bad_inputs.py runs it): ROWS, one (cli, argv, word) a
row, where cli names a command line of that file's CLIS, argv is what a demanding user types, and
word is a word the command's one-line refusal must contain. A row's index is the start of its test
id (tests/slow_tests.py names one): add rows at the end."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

BAD_INTS = ["0", "-1", "x", "1.5", "", "1e3", str(2**63)]
HUGE = str(10**9)

ROWS: list[tuple[str, list[str], str]] = []  # (cli, argv, a word the one line must contain)


def rows(cli: str, flag: str, values, word: str | None = None) -> None:
    for value in values:
        ROWS.append((cli, [flag, value], word or flag.lstrip("-")))


# the von Oswald runners
for cli in ("concat", "copy"):
    for flag in ("--steps", "--batch_size", "--eval_size", "--log_every"):
        rows(cli, flag, BAD_INTS)
    rows(cli, "--seed", ["-1", str(2**32), str(2**63), "x"])
    rows(cli, "--lr", ["0", "-1", "nan", "inf", "x"])
    rows(cli, "--noise_p", ["-0.1", "1.5", "nan"])
    rows(cli, "--ordering", ["sorted", ""])
    rows(cli, "--noise_mode", ["gaussian"])
    for item, word in (
        ("model.nope=1", "nope"),
        ("train.steps=0", "steps"),
        ("train.lr=-1", "lr"),
        ("model.num_heads=1000", "num_heads"),
        ("task.d=100000", "d="),
        ("=1", "set"),
        ("train.steps", "set"),
    ):
        ROWS.append((cli, ["--set", item], word))
    rows(cli, "--batch_size", [str(10**7)], "batch_size")
    rows(cli, "--eval_size", [HUGE], "eval_size")
rows("concat", "--num_layers", ["0", "100000", "x"])
ROWS += [
    ("concat", ["--out", "."], "--out"),
    ("concat", ["--out", "/"], "--out"),
    ("concat", ["--out", str(ROOT)], "--out"),
    ("concat", ["--out", str(ROOT.parent)], "--out"),
    ("concat", ["--noise_mode", "label_noise"], "noise_p"),
    ("concat", ["--bogus"], "--bogus"),
    ("concat", ["--train_noise_p", "2"], "train_noise_p"),
]
rows("rerun", "--config", ["/nonexistent/config.json"], "config")
rows("rerun", "--together", ["/nonexistent/group.json", "/"], "together")

# limits_of_icl: runners.train
for key, values in {
    "model.attention_type": ["nope", "softmax"],
    "model.family": ["gpt3"],
    "training.task": ["cubic_regression"],
    "model.n_embd": ["0", "-64", "x", "65"],
    "model.n_head": ["0", "1000"],
    "model.n_layer": ["0", "100000"],
    "model.n_positions": ["1", "0"],
    "model.n_dims": ["0", "100000"],
    "training.batch_size": ["0", str(10**8)],
    "training.train_steps": ["0", "-5"],
    "training.learning_rate": ["0", "-1"],
    "training.seed": ["-1", str(2**40)],
    "training.curriculum.points.end": ["1"],
    "training.curriculum.dims.end": ["1"],
    "training.eval_size": ["0"],
    "model.attention_kwargs": ["[1, 2]"],
    "training.data": ["cauchy"],
}.items():
    for value in values:
        ROWS.append(("train", ["--config", "configs/quick.yaml", "--set", f"{key}={value}"], key.rsplit(".", 1)[-1]))
ROWS += [
    ("train", ["--config", "configs/mechanisms.yaml", "--set", f"training.eval_size={HUGE}"], "eval_size"),
    ("train", ["--config", "/nonexistent.yaml"], "config"),
    ("train", ["--config", "configs/quick.yaml", "--set", "nokey"], "set"),
    ("train", ["--config", "configs/quick.yaml", "--set", "model.unknown_key=1"], "unknown_key"),
    ("train", ["--config", "configs/quick.yaml", "--out", "/"], "--out"),
    ("train", ["--config", "configs/quick.yaml", "--resume", "--out", "/nonexistent/run"], "resume"),
    ("train", ["configs/lengthgen/tasks/linear_regression/alibi.yaml", "--eval-only=True"], "analysis.length_gen"),
]  # the length study's eval.sh: pointed at the analysis

# the dynamics paper: runners.dynamics
for flag in ("--head", "--rank", "--in_dim", "--trainset_size", "--epoch", "--log_every"):
    rows("runners.dynamics", flag, ["0", "x", "-3"])
rows("runners.dynamics", "--seq_len", ["1", "x"])
rows("runners.dynamics", "--icl", ["1.5", "-0.1", "nan"])
rows("runners.dynamics", "--lr", ["0", "inf"])
rows("runners.dynamics", "--init", ["0", "-1"])
rows("runners.dynamics", "--model", ["attnX"])
rows("runners.dynamics", "--trainset_size", [str(10**8)], "trainset_size")
rows("runners.dynamics", "--seed", [str(2**32)])
ROWS += [
    ("runners.dynamics", ["--optimizer", "sgd", "--batch_size", "0"], "batch_size"),
    ("runners.dynamics", ["--rank", "50", "--in_dim", "4"], "rank"),
]

# sweeps
for cli in ("eval_order", "eval_noise"):
    rows(cli, "--models", ["lsa9", ""], "models")
    rows(cli, "--seeds", ["-1", "x", str(2**32), "1,,2"], "seeds")
    rows(cli, "--steps", ["0", "x"])
    rows(cli, "--jobs", ["0", "x"])
    rows(cli, "--out", ["results.txt"], "out")
    rows(cli, "--grid", ["nothing"], "grid")
    ROWS.append((cli, ["--grid", "train.nope=1,2"], "nope"))
    ROWS.append((cli, ["--grid", "train.steps=0"], "steps=0"))
rows("eval_order", "--ordering", ["sideways"], "ordering")
rows("eval_order", "--executor", ["dask"], "executor")
rows("eval_order", "--cpus-per-run", ["0", "x"], "cpus-per-run")
ROWS += [
    ("eval_order", ["--executor", "ray", "--address", "127.0.0.1:1"], "--address"),
    ("eval_order", ["--address", "127.0.0.1:6379"], "--address"),
    ("mechanisms", ["--executor", "ray", "--address", "127.0.0.1:1"], "--address"),
    ("mechanisms", ["--executor", "ray", "--seeds-together"], "--seeds-together"),
    ("reproduce", ["--executor", "ray", "--address", "127.0.0.1:1"], "--address"),
]
rows("eval_noise", "--p", ["1.5", "x"], "p")
rows("eval_noise", "--noise_mode", ["gaussian"], "noise_mode")

# studies
for cli in ("mechanisms", "dynamics"):
    rows(cli, "--jobs", ["0", "x"])
rows("mechanisms", "--mechanisms", ["softmax", ","], "mechanisms")
rows("lengthgen", "--positions", ["xpos", ","], "positions")
rows("lengthgen", "--tasks", ["parity"], "tasks")
rows("lengthgen", "--jobs", ["0", "x"])
rows("mixers", "--mixers", ["based", ",", "attention,hyena"], "mixers")
rows("mixers", "--seeds", ["x", "-1", ",", "0,,1"], "seeds")
rows("mixers", "--jobs", ["0", "x"])
rows("linear_attention", "--jobs", ["0", "x"])
ROWS += [
    ("protocol_sweep", [], "study"),
    ("protocol_sweep", ["mixers"], "mixers"),
    ("protocol_sweep", ["mechanisms", "--protocols", "fast"], "--protocols"),
    ("protocol_sweep", ["lengthgen", "--protocols", ","], "--protocols"),
    ("protocol_sweep", ["mechanisms", "--jobs", "0"], "jobs"),
    ("protocol_sweep", ["lengthgen", "--runs-dir", "README.md"], "runs-dir"),
    ("yarn_recency", ["--jobs", "0"], "jobs"),
    ("yarn_recency", ["--report-dir", "README.md"], "report-dir"),
    ("yarn_recency", ["--seeds", "1"], "--seeds"),
]
rows("linear_attention", "--runs-dir", ["README.md"], "runs-dir")
for cli in ("mechanisms", "lengthgen", "mixers"):
    rows(cli, "--config", ["configs/none.yaml"], "none.yaml")
ROWS += [
    ("mixers", ["--config", "configs/mechanisms.yaml"], "model"),  # a run config is not a grid
    ("paper_scale", ["--study", "bogus"], "study"),
    ("paper_scale", [], "--study"),
    ("paper_scale", ["--study", "mechanisms", "--only", "softmax"], "only"),
    ("paper_scale", ["--study", "lengthgen", "--only", ","], "only"),
    ("paper_scale", ["--study", "mixers", "--jobs", "0"], "jobs"),
    ("paper_scale", ["--study", "mixers", "--probe-steps", "x"], "probe"),
    ("compare_originals", [], "--torch-python"),
    ("compare_originals", ["--torch-python", sys.executable], "nothing to compare"),
    ("compare_originals", ["--torch-python", sys.executable, "--miniseq", "."], "--miniseq"),
    (
        "compare_originals",
        ["--torch-python", "/nonexistent/python", "--limits-of-icl", "/nonexistent"],
        "--limits-of-icl",
    ),
    (
        "compare_originals",
        ["--torch-python", sys.executable, "--miniseq", "/nonexistent", "--rounds", "0"],
        "--miniseq",
    ),
]

# the ICL benchmark's recipe: choices, options, the task's sizes
ROWS += [
    ("recipe", ["task:nope"], "task:nope"),
    ("recipe", ["model.seq_mixer:flash"], "flash"),
    ("recipe", ["model.state_mixer:relu"], "relu"),
    ("recipe", ["foo:bar"], "foo"),
    ("recipe", ["task:mqar", "--task.num_pairs", "200"], "num_pairs"),
    ("recipe", ["task:mqar", "--task.seq_len", "20"], "seq_len"),
    ("recipe", ["task:mqar", "--task.filler", "random"], "filler"),
    ("recipe", ["task:mqar", "--task.vocab_size", "x"], "vocab_size"),
    ("recipe", ["task:disjoint_sets", "--task.set_size", "400"], "set_size"),
    ("recipe", ["task:sparse_parity", "--task.k", "30"], "k=30"),
    ("recipe", ["--task.bogus", "1"], "--task.bogus"),
    ("recipe", ["--train.train_steps", "0"], "train_steps"),
    ("recipe", ["--train.learning_rate", "fast"], "learning_rate"),
    ("recipe", ["--model.width", "30", "--model.n_head", "4"], "width"),
    ("recipe", ["model.seq_mixer:linear_attention", "--model.seq_mixer.feature_map", "cosine"], "feature_map"),
    ("recipe", ["model.seq_mixer:gated_linear_attn", "--model.seq_mixer.gate_rank", "0"], "gate_rank"),
    # the ICL benchmark's own names (src/cli/recipe_names.py): refusals name what was typed
    ("recipe", ["task:boolean"], "--task.boolean_type"),
    ("recipe", ["task:boolean", "--task.boolean_type", "xor"], "boolean_type"),
    ("recipe", ["task:regression", "--task.regression_type", "cubic"], "regression_type"),
    ("recipe", ["task:regression", "--task.regression_type", "outlier", "--task.outlier_prob", "2"], "outlier_prob"),
    ("recipe", ["task:regression", "--task.renormalize_noisy", "maybe"], "renormalize_noisy"),
    ("recipe", ["task:regression", "--task.input_dim", "x"], "--task.input_dim"),
    ("recipe", ["task:mqar", "--task.random_non_queries", "maybe"], "random_non_queries"),
    ("recipe", ["task:mqar", "--task.num_kv_pairs", "200"], "--task.num_kv_pairs"),
    ("recipe", ["task:mqar", "--task.input_seq_len", "20"], "--task.input_seq_len"),
    ("recipe", ["task:disjoint", "--task.long_length", "400"], "--task.long_length"),
    ("recipe", ["--train.max_steps", "0"], "--train.max_steps"),
    ("recipe", ["--seed", "-1"], "--seed"),
    ("recipe", ["--optimizer.lr", "0"], "--optimizer.lr"),
]
for flag in ("--seeds", "--ks", "--batch_size", "--jobs", "--steps-scale"):
    rows("reproduce", flag, ["x", "-1"], flag.lstrip("-").split("-")[0])

# analyses and figures on runs that do not exist / flags out of range
for cli in (
    "alignment",
    "ood_eval",
    "attention_stats",
    "attention_heatmap",
    "icl_curve",
    "robustness",
    "analysis.dynamics",
    "length_gen",
    "recency",
    "prompt_tests",
    "induction",
    "probes",
    "algorithm_selection",
):
    ROWS.append((cli, ["--run", "/nonexistent/run"], "/nonexistent/run"))
    ROWS.append((cli, [], "--run"))
rows("alignment", "--eta", ["0", "-1", "nan"])
rows("ood_eval", "--alphas", ["0", "-2", "x"])
rows("icl_curve", "--points", ["0", "x"])
for cli in ("length_gen", "recency", "prompt_tests"):
    rows(cli, "--factor", ["0", "x", "1000"])
rows("recency", "--bins", ["1", "x"])
rows("induction", "--repeat", ["1", "x"])
rows("induction", "--sequences", ["0", "x"])
rows("probes", "--prompts", ["39", "x"])
rows("probes", "--mlp-hidden", ["-1", "x"])
rows("algorithm_selection", "--noise-stds", ["x", "-1", "0.1,0.1"])
rows("algorithm_selection", "--context", ["0", "x"])
rows("algorithm_selection", "--prompts", ["9", "x"])
ROWS += [
    ("fig_templates", ["--from", "/nonexistent.csv", "--out", "figs"], "nonexistent"),
    ("fig_templates", ["--out", "figs"], "--from"),
    ("rundir", ["--nope"], "usage"),
    ("rundir", [], "usage"),
]


# issue 63's held-back probe (each accepted before): a pool beyond int32 indices and memory, a
# local_global window of 0 (the original's query with no key) or global positions outside the
# sequence, a hybrid list longer than the layers, our name:option=value spelling where the YAML
# wants attention_kwargs, and a list that names an item twice
QUICK = ["--config", "configs/quick.yaml", "--set"]
ROWS += [
    ("train", QUICK + ["training.num_tasks=1000000000000"], "num_tasks"),
    ("train", QUICK + ["training.num_training_examples=99999999999"], "num_training_examples"),
    (
        "train",
        QUICK + ["model.attention_type=local_global", "--set", "model.attention_kwargs.local_window_size=0"],
        "local_window_size",
    ),
    (
        "train",
        QUICK + ["model.attention_type=local_global", "--set", "model.attention_kwargs.global_attn_indices=[3,400]"],
        "global_attn_indices[1]",
    ),
    (
        "train",
        QUICK + ["model.attention_type=local_global", "--set", "model.attention_kwargs.global_attn_indices=[3,3]"],
        "global_attn_indices",
    ),
    ("train", QUICK + ["model.attention_type=base_conv:kernel_size=-1"], "attention_kwargs"),
    ("recipe", ["wandb:None", "task:mqar", "--model.seq_mixers=attention,based,delta_net"], "seq_mixers"),
    (
        "recipe",
        ["task:mqar", "model.seq_mixer:local_global", "--model.seq_mixer.local_window_size", "0"],
        "local_window_size",
    ),
    (
        "recipe",
        ["task:mqar", "model.seq_mixer:local_global", "--model.seq_mixer.global_attn_indices", "3", "64"],
        "global_attn_indices",
    ),
    ("zoo", ["--seeds", "0,0"], "--seeds"),
    ("zoo", ["--mixers", "attention,hyena,attention"], "--mixers"),
    ("mixers", ["--seeds", "1,1"], "--seeds"),
    ("task_diversity", ["--pools", "2,8,2"], "--pools"),
    ("matrix", ["--mixers", "linear,linear"], "--mixers"),
    ("lengthgen", ["--positions", "rope,rope"], "--positions"),
    ("lengthgen", ["--seeds", "0,1,0"], "--seeds"),
]
# a layer count far past the refused range: refused before any check builds a per-layer list (the
# gpt2 check read one mixer per layer and grew past 18 GB at 10^9 before its size check)
ROWS.append(("train", ["--config", "configs/quick.yaml", "--set", f"model.n_layer={HUGE}"], "n_layer"))
