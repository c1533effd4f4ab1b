"""The golden runs: three small trainings through the runner CLIs whose every number must
not move when the code is refactored (issue 11: "the paper's numbers do not move").

`read_run()` returns, per run, every metrics row (without wall times), the summary's metric
values, the analysis outputs (alignment.json, ood.csv, attention_stats AUROC) and a sha256
of every parameter array. The legacy files in tests/golden/ were written by the code of commit
d39df7a (before the registries) on three machines; `make golden_record` (tests/golden_record.py)
adds a machine's record, and tests/golden_machines.py says which record a machine is compared
with, and how.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

SMALL = ["--batch_size", "256", "--eval_size", "500", "--log_every", "100", "--quiet"]
# name -> (runner module, flags)
RUNS = {
    "lsa1": ("runners.run_concat_inputs_targets", ["--steps", "300", "--save_attention", *SMALL]),
    "lsa_rec_k3": ("runners.run_concat_inputs_targets", ["--steps", "200", "--num_layers", "3", *SMALL]),
    "twolayer": (
        "runners.run_softmax_copy",
        [
            "--steps",
            "200",
            "--ordering",
            "easy2hard",
            "--noise_mode",
            "random_pairs",
            "--noise_p",
            "0.2",
            "--save_attention",
            *SMALL,
        ],
    ),
}
TIMING_KEYS = {"elapsed_s", "train_seconds"}


def same_numbers(new, old) -> bool:
    """Equal to another machine's rounding (tests/golden_machines.py: 1e-6 relative): for records
    whose machine is not known well enough to claim its bits (tests/fixtures/v1)."""
    from golden_machines import _close

    return _close(new, old)


def params_digest(path: Path) -> dict:
    with np.load(path, allow_pickle=False) as data:
        return {k: hashlib.sha256(np.ascontiguousarray(data[k]).tobytes()).hexdigest() for k in sorted(data.files)}


def read_run(out: Path) -> dict:
    def load(name):
        return json.loads((out / name).read_text())

    metrics = [
        {k: v for k, v in json.loads(line).items() if k not in TIMING_KEYS}
        for line in (out / "metrics.jsonl").read_text().splitlines()
        if line.strip()
    ]
    summary = {k: v for k, v in load("metrics_summary.json").items() if isinstance(v, float) and k not in TIMING_KEYS}
    record = {
        "metrics": metrics,
        "summary": summary,
        "alignment": {k: v for k, v in load("analysis/alignment.json").items() if isinstance(v, float)},
        "ood_csv": (out / "analysis/ood.csv").read_text(),
        "params_sha256": params_digest(out / "params.npz"),
    }
    if (out / "analysis/attention_stats.json").exists():
        record["auroc"] = [e["auroc"] for e in load("analysis/attention_stats.json")["layers"]]
    return record


def preset_of_runner(runner: str) -> str:
    """The preset a runner module is the CLI of (the first one, for a shared runner)."""
    from src.gd_paper.presets import MODEL_PRESETS

    return next(name for name, spec in MODEL_PRESETS.items() if spec.runner == runner)


def train(runner: str, flags: list[str], out: Path) -> None:
    """`python -m <runner> FLAGS --out OUT`, in-process (the runner module's `main`)."""
    import importlib

    code = importlib.import_module(runner).main([*flags, "--out", str(out)])
    assert code == 0, f"{runner} {flags} exited {code}"
