"""The eval prompts of the originals' comparison (scripts/originals_beside_ours.py, step 1): the
mechanisms study's fixed eval set (configs/mechanisms.yaml) as (xs [E, n, d], ys [E, n]) float32,
exported to a .npz, and the check that they are the recorded ones: the repository's baselines on
them must give the baseline rows (squared error / d per position) recorded in the study's results
to RTOL (with an ATOL floor).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from src.files import atomic_save_npz
from src.flags import UsageError

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "configs" / "mechanisms.yaml"
BASELINES_CHECKED = ("least_squares", "averaging")
# from n = d on least squares interpolates: its error is float32 rounding, 1e-13 to 3e-9 by the CPU
# (2.8e-9 at n = 5 on an AMD family 26, 5.4e-10 where the rows were recorded), so a floor
RTOL, ATOL = 1e-5, 1e-8


def mechanisms_settings():
    from src.formats.limits_of_icl import read_config

    settings, _ = read_config(str(CONFIG))
    return settings


def eval_prompts(settings) -> tuple[np.ndarray, np.ndarray]:
    """(xs [E, n, d], ys [E, n]) float32: the fixed eval set every run of the study is scored on
    (src.systems.gpt2_prompts.eval_batch, what the ICL curve analysis scores through GPT2Pairs.prompts)."""
    from src.systems import gpt2_prompts

    batch = gpt2_prompts.eval_batch(settings)
    if float(np.min(np.asarray(batch.weights))) != 1.0:
        raise UsageError("the eval set has masked points; accepted: a config without a points curriculum at its end")
    return np.asarray(batch.xs, np.float32), np.asarray(batch.ys, np.float32)


def export_prompts(path: Path, settings=None) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = eval_prompts(settings or mechanisms_settings())
    atomic_save_npz(path, {"xs": xs, "ys": ys})
    return xs, ys


def baseline_rows(
    xs: np.ndarray, ys: np.ndarray, names: Sequence[str] = BASELINES_CHECKED, task: str = "linear_regression"
) -> dict[str, np.ndarray]:
    """The repository's baselines on prompts (xs, ys): name -> squared error / d per position,
    mean over prompts (as analysis.icl_curve computes its rows)."""
    import jax.numpy as jnp
    from baselines.regression import row_wise
    from src.registry import registry
    from src.tasks.objectives import objective_of
    from src.tasks.pairs import pair_prompt

    batch = pair_prompt(jnp.asarray(xs), jnp.asarray(ys), jnp.zeros(xs.shape[::2], jnp.float32))
    objective, out = objective_of(task), {}
    for name in names:
        entry = registry("baseline").get(name)
        guess = row_wise(entry.build(entry.default_options()), batch)(batch)
        out[name] = np.asarray(objective.point_errors(guess, batch)).mean(axis=0)
    return out


def recorded_rows(results: dict, mechanism: str, names: Sequence[str] = BASELINES_CHECKED) -> dict[str, np.ndarray]:
    """The baseline rows recorded for `mechanism` (every seed's curves hold the same rows)."""
    curves = results["results"][mechanism]["curves"]
    return {name: np.asarray([c[name] for c in curves], np.float64) for name in names}


def check_prompts(xs, ys, results: dict, mechanisms: Sequence[str]) -> dict:
    """{mechanism: {baseline: max relative difference}}; raises RuntimeError when a recorded row
    is not reproduced on (xs, ys) to RTOL (with an ATOL floor)."""
    ours = baseline_rows(xs, ys)
    report = {}
    for mechanism in mechanisms:
        report[mechanism] = {}
        for name, rows in recorded_rows(results, mechanism).items():
            worst = float(np.max(np.abs(rows - ours[name]) / np.maximum(np.abs(rows), ATOL / RTOL)))
            report[mechanism][name] = worst
            if worst > RTOL:
                raise RuntimeError(
                    f"the exported prompts do not give the recorded {name} row of {mechanism} "
                    f"(max relative difference {worst:.3g} > {RTOL:g}): not the recorded eval set"
                )
    return report
