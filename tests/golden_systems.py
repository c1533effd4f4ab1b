"""The golden runs of the three newer systems (the GPT-2 mechanisms / length study, the token
recipe and the linear-attention dynamics): small runs through their command lines whose every
number must not move when the code is refactored (the paper's own system: tests/golden_runs.py).

Each run is the command line a user types (`python -m runners.<x> ARGV`), called in-process.
`read_run` keeps every metrics row and summary value (no wall times), sha256 digests of every
parameter array, and each system's own outputs (the GPT-2 training log, ICL curve and stress
tests; the recipe's decoded examples; the dynamics trajectory and its analysis).

    python tests/golden_systems.py --check [RUN ...]   # every golden run of every system against its
                                                      # records (make golden; tests/golden_machines.py)
    python tests/golden_record.py                      # this machine's record (make golden_record)
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import sys
from pathlib import Path

import numpy as np

GPT2_SMALL = [
    "--set",
    "training.train_steps=60",
    "--set",
    "training.log_every=20",
    "--set",
    "training.save_every_steps=40",
    "--set",
    "training.eval_size=100",
]
# the sequence family's runs were recorded with its dense layers on [B, T, D] and the recipe's
# training logits at every position (before `flat` and `scored` became the defaults): they name
# those settings and stay bit-identical
GPT2_BATCHED = ["--set", "model.dense_layout=batched"]
RECIPE_BATCHED = ["--model.dense_layout", "batched", "--train.logits", "all"]
# the recipe's pair-task runs were recorded before any analysis applied to them (the ICL curve and
# the stresses have since): they leave them out, so the record is what it compares
RECIPE_PAIRS = [*RECIPE_BATCHED, "--skip_analysis"]
# name -> (runner module, argv without --out); the dynamics runs were recorded before the
# original's initialisation became the default: they name the convention they were trained with
RUNS = {
    "gpt2_dummy": ("runners.train", ["--config", "configs/quick.yaml", *GPT2_BATCHED, "--quiet"]),
    "gpt2_fire_curriculum": (
        "runners.train",
        [
            "--config",
            "tests/fixtures/lengthgen_gpt2.yaml",
            "--set",
            "model.position=fire",
            "--set",
            "training.curriculum.points.interval=15",
            *GPT2_SMALL,
            *GPT2_BATCHED,
            "--quiet",
        ],
    ),
    "gpt2_favor_conjunction": (
        "runners.train",
        [
            "--config",
            "tests/fixtures/mechanisms_constant_6k.yaml",
            "--set",
            "model.attention_type=favor",
            "--set",
            "training.task=conjunction",
            *GPT2_SMALL,
            *GPT2_BATCHED,
            "--quiet",
        ],
    ),
    "recipe_mqar_gla": (
        "runners.recipe",
        [
            "task:mqar",
            "model.seq_mixer:gated_linear_attn",
            "model.state_mixer:swiglu",
            "--task.num_pairs",
            "4",
            "--model.width",
            "32",
            "--train.train_steps",
            "60",
            "--train.log_every",
            "20",
            "--train.eval_size",
            "64",
            *RECIPE_BATCHED,
            "--quiet",
        ],
    ),
    "recipe_parity_linear": (
        "runners.recipe",
        [
            "task:parity",
            "model.seq_mixer:linear_attention",
            "model.state_mixer:mlp",
            "--pairs.n_points",
            "12",
            "--pairs.n_dims",
            "6",
            "--model.width",
            "32",
            "--train.train_steps",
            "40",
            "--train.log_every",
            "20",
            "--train.eval_size",
            "64",
            *RECIPE_PAIRS,
            "--quiet",
        ],
    ),
    "recipe_regression_attention": (
        "runners.recipe",
        [
            "task:linear_regression",
            "model.seq_mixer:attention",
            "model.state_mixer:glu",
            "--pairs.n_points",
            "10",
            "--pairs.n_dims",
            "4",
            "--model.width",
            "32",
            "--train.train_steps",
            "40",
            "--train.log_every",
            "20",
            "--train.eval_size",
            "64",
            *RECIPE_PAIRS,
            "--quiet",
        ],
    ),
    "dynamics_attnS": (
        "runners.dynamics",
        [
            "--model",
            "attnS",
            "--head",
            "3",
            "--KQ_dim",
            "2",
            "--in_dim",
            "3",
            "--seq_len",
            "8",
            "--init",
            "1e-2",
            "--lr",
            "0.05",
            "--trainset_size",
            "300",
            "--testset",
            "50",
            "--epoch",
            "301",
            "--log_every",
            "10",
            "--show",
            "--init_convention",
            "uniform",
            "--quiet",
        ],
    ),
    "dynamics_mlp_sgd": (
        "runners.dynamics",
        [
            "--model",
            "mlp",
            "--cubic_feat",
            "--head",
            "4",
            "--in_dim",
            "3",
            "--seq_len",
            "8",
            "--init",
            "1e-3",
            "--lr",
            "0.01",
            "--trainset_size",
            "200",
            "--optimizer",
            "sgd",
            "--batch_size",
            "50",
            "--epoch",
            "101",
            "--log_every",
            "10",
            "--init_convention",
            "uniform",
            "--quiet",
        ],
    ),
    "dynamics_attnM_float64": (
        "runners.dynamics",
        [
            "--model",
            "attnM",
            "--head",
            "2",
            "--in_dim",
            "3",
            "--seq_len",
            "6",
            "--init",
            "1e-3",
            "--lr",
            "0.1",
            "--trainset_size",
            "200",
            "--epoch",
            "201",
            "--log_every",
            "20",
            "--float64",
            "--init_convention",
            "uniform",
            "--quiet",
        ],
    ),
}
TIMING_KEYS = {"elapsed_s", "train_seconds", "ms_per_epoch", "seconds"}


def digests(path: Path) -> dict:
    """sha256 of every array of an .npz, by key."""
    with np.load(path, allow_pickle=False) as data:
        return {k: hashlib.sha256(np.ascontiguousarray(data[k]).tobytes()).hexdigest() for k in sorted(data.files)}


def _numbers(record: dict) -> dict:
    """The numbers (and lists of numbers) of a summary or metrics row, without wall times."""

    def number(v):
        return isinstance(v, (float, int)) and not isinstance(v, bool) or v is None

    return {
        k: v
        for k, v in record.items()
        if k not in TIMING_KEYS and (number(v) and v is not None or isinstance(v, list) and all(map(number, v)))
    }


def read_run(out: Path) -> dict:
    load = lambda name: json.loads((out / name).read_text())
    record = {
        "metrics": [
            _numbers(json.loads(line)) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()
        ],
        "summary": _numbers(load("metrics_summary.json")),
        "params_sha256": digests(out / "params.npz"),
    }
    for name in ("training_log.csv", "analysis/icl_curve.csv"):
        if (out / name).exists():
            record[name] = (out / name).read_text()
    for name in ("analysis/robustness.json", "examples.json", "analysis/dynamics.json"):
        if (out / name).exists():
            record[name] = load(name)
    if "analysis/dynamics.json" in record:
        record["analysis/dynamics.json"] = as_recorded(record["analysis/dynamics.json"])
    if (out / "dynamics.npz").exists():
        record["dynamics.npz"] = digests(out / "dynamics.npz")
    return record


def as_recorded(analysis: dict) -> dict:
    """analysis/dynamics.json in the form the runs were recorded in: the drops between two
    plateaus with their three keys (the drops from the initial or to the final loss of a run that
    starts or ends falling, counted since 2026-11-25, are left out), and no rule text."""
    drops = [
        {k: d[k] for k in ("epoch", "from_level", "to_level")}
        for d in analysis["drops"]
        if d.get("from_plateau", 0) is not None and d.get("to_plateau", 0) is not None
    ]
    return {**{k: v for k, v in analysis.items() if k != "rule"}, "drops": drops}


def train(runner: str, argv: list[str], out: Path) -> None:
    """`python -m <runner> ARGV --out OUT`, in-process (the runner module's `main`)."""
    code = importlib.import_module(runner).main([*argv, "--out", str(out)])
    assert code == 0, f"{runner} {argv} exited {code}"


def every_run() -> dict:
    """name -> (the module that trains and reads the run, how its record is read) for all 12
    golden runs: the paper's (tests/golden_runs.py, as stored) and the newer systems' (`expected`)."""
    import golden_runs

    as_stored = lambda name, runs: runs[name]  # noqa: E731
    return {
        **{name: (golden_runs, as_stored) for name in golden_runs.RUNS},
        **{name: (sys.modules[__name__], expected) for name in RUNS},
    }


def expected(name: str, golden: dict) -> dict:
    """The recorded run, its parameter names read as the one sequence family names them (the
    GPT-2 and recipe models were separate modules when it was recorded)."""
    from src.models.sequence import canonical_param_name

    want = dict(golden[name])
    if "analysis/dynamics.json" in want:
        want["analysis/dynamics.json"] = as_recorded(want["analysis/dynamics.json"])
    if not name.startswith("dynamics"):
        want["params_sha256"] = {canonical_param_name(k): v for k, v in want["params_sha256"].items()}
    return want


@contextlib.contextmanager
def recorded_norm_order(recorded_names):
    """Gradient clipping's global norm summed over the parameters in the order of the names they
    had when the run was recorded. The one family names parameters by role
    (lm/~_stack/block_0/state_mixer/norm_state is lm/block_0/norm_state now), which reorders the
    leaves of the parameter tree and so the terms of the norm's float sum; on some CPUs (the AMD
    AVX-512 kind) its last bit, and so every clipped step, then differs. Nothing else may differ:
    a run that matches its record only under this order has moved by the order of that sum alone."""
    import jax.numpy as jnp
    import optax.tree
    from src.models.sequence import canonical_param_name

    order = [canonical_param_name(k) for k in sorted(recorded_names, key=lambda k: tuple(k.rsplit("/", 1)))]
    plain = optax.tree.norm

    def norm(tree, *args, **kwargs):
        flat = {f"{module}/{name}": leaf for module, leaves in tree.items() for name, leaf in leaves.items()}
        if args or kwargs or sorted(flat) != sorted(order):
            return plain(tree, *args, **kwargs)
        return jnp.sqrt(sum(jnp.sum(jnp.square(flat[key])) for key in order))

    optax.tree.norm = norm
    try:
        yield
    finally:
        optax.tree.norm = plain


def check(names=None) -> int:
    """Train every recorded run now and compare it as the suite does (tests/golden_machines.py:
    bit for bit on a machine with its own record, else to the tolerance); prints one line per run,
    returns the failures. Where a run compared bit for bit moved, it is trained again with the
    gradient norm summed in its recorded parameter order (`recorded_norm_order`) and passes only if
    that is bit-identical, saying so."""
    import tempfile
    from golden_machines import compare_run, comparison, mode_line, param_samples

    print(mode_line(), flush=True)
    failures = 0
    everything = every_run()
    with tempfile.TemporaryDirectory() as tmp:
        for name in names or everything:
            module, transform = everything[name]
            runner, argv = module.RUNS[name]

            def compared(out: Path):
                return compare_run(name, module.read_run(out), param_samples(out / "params.npz"), transform)

            module.train(runner, [*argv], Path(tmp) / name)
            moved, how = compared(Path(tmp) / name)
            records, exact, _ = comparison(name)
            if moved and exact and transform is expected:
                with recorded_norm_order(records[0].runs[name]["params_sha256"]):
                    module.train(runner, [*argv], Path(tmp) / f"{name}_recorded_order")
                if not compared(Path(tmp) / f"{name}_recorded_order")[0]:
                    how += (
                        " - bit-identical with the gradient norm summed in the recorded parameter order "
                        f"(without it: {len(moved)} keys differ)"
                    )
                    moved = []
            failures += bool(moved)
            print(f"{'MOVED: ' + '; '.join(moved) + ' - ' if moved else 'ok  '}{how}", flush=True)
    return failures


if __name__ == "__main__":
    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root))
    sys.path.insert(0, str(root / "tests"))
    if sys.argv[1:2] != ["--check"]:
        sys.exit("usage: python tests/golden_systems.py --check [RUN ...]  (to record: python tests/golden_record.py)")
    import os

    os.chdir(root)
    sys.exit(1 if check(sys.argv[2:]) else 0)
