"""Sweep drivers (eval_order / eval_noise via sweep.py) and report figures (plots.fig_templates).

One tiny 2-run order sweep (lsa1, two orderings, 20 steps) is shared by the sweep tests.
"""

import csv
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from src import rundir as names
from src.rundir import RunDir

ROOT = Path(__file__).resolve().parent.parent
TINY = ["--steps", "20", "--batch_size", "128", "--eval_size", "300", "--log_every", "10"]
GRID = ["--models", "lsa1", "--ordering", "random,smallnorm2largenorm", "--seeds", "0"]


def driver(module, *args, timeout=300):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def read_csv(path):
    with open(path) as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    base = tmp_path_factory.mktemp("sweep")
    out, runs = base / "results.csv", base / "runs"
    args = [*GRID, *TINY, "--out", str(out), "--runs-dir", str(runs), "--jobs", "2", "--quiet"]
    first = driver("eval_order", *args)
    assert first.returncode == 0, first.stdout + first.stderr
    return {"out": out, "runs": runs, "args": args, "first": first}


def test_sweep_rows_match_run_directories(sweep):
    rows = read_csv(sweep["out"])
    assert len(rows) == 2
    assert {r["ordering"] for r in rows} == {"random", "smallnorm2largenorm"}
    for row in rows:
        run = RunDir(row["run_dir"])
        assert run.is_complete()
        summary = run.load_json(names.SUMMARY)
        settings = run.load_config()["settings"]
        assert row["status"] == "complete" and row["model"] == summary["model"] == "lsa1"
        assert int(row["seed"]) == summary["seed"] == 0
        assert int(row["steps"]) == summary["steps"] == 20
        assert float(row["eval_loss"]) == summary["eval_loss"]
        assert float(row["gd_loss"]) == summary["gd_loss"]
        assert row["train_ordering"] == settings["train_curriculum"]["ordering"] == row["ordering"]
        assert row["eval_ordering"] == settings["eval_curriculum"]["ordering"] == row["ordering"]
        assert row["noise_mode"] == "clean" and row["p"] == ""
        assert math.isnan(float(row["auroc"] or "nan"))  # clean: nothing to separate
        assert run.path.name.startswith(f"lsa1__ord-{row['ordering']}__noise-clean__seed0")
    # lsa1 has no positional information: exactly invariant to context order (SPEC §7).
    losses = [float(r["eval_loss"]) for r in rows]
    assert max(losses) - min(losses) <= 1e-5


def test_rerun_skips_finished_runs(sweep):
    summaries = sorted(Path(sweep["runs"]).glob(f"*/{names.SUMMARY}"))
    stamps = [p.stat().st_mtime_ns for p in summaries]
    before = Path(sweep["out"]).read_text()
    again = driver("eval_order", *sweep["args"])
    assert again.returncode == 0, again.stderr
    assert "0 trained now, 2 already finished" in again.stdout
    assert [p.stat().st_mtime_ns for p in summaries] == stamps
    assert Path(sweep["out"]).read_text() == before


def test_incomplete_run_is_planned_for_redo(sweep, tmp_path):
    # A copy of the sweep where one run lost an analysis output (as if killed mid-run).
    import shutil

    from src.jobs import engine as launch

    runs = tmp_path / "runs"
    shutil.copytree(sweep["runs"], runs, ignore=shutil.ignore_patterns(launch.JAX_CACHE, launch.LOGS))
    victim = sorted(p for p in runs.iterdir() if p.is_dir())[0]
    (victim / names.ALIGNMENT).unlink()
    args = [*GRID, *TINY, "--out", str(tmp_path / "r.csv"), "--runs-dir", str(runs), "--dry_run"]
    plan = driver("eval_order", *args)
    assert plan.returncode == 0, plan.stderr
    lines = plan.stdout.strip().splitlines()
    assert len(lines) == 2
    redo = [line for line in lines if line.startswith("train")]
    assert len(redo) == 1 and victim.name in redo[0] and "--overwrite" in redo[0]
    # Other settings in the same runs dir are refused (not silently mixed or overwritten).
    other = driver(
        "eval_order", *GRID, "--steps", "30", "--out", str(tmp_path / "r.csv"), "--runs-dir", str(runs), "--dry_run"
    )
    assert other.returncode == 2 and "--overwrite" in other.stderr


@pytest.mark.parametrize(
    "bad, flag",
    [
        (["--seeds", ""], "--seeds"),
        (["--models", ","], "--models"),
        (["--models", "lsa1,gpt"], "--models"),
        (["--ordering", "random,sideways"], "--ordering"),
        (["--noise_mode", "label_noise", "--p", "0,1.5"], "--p"),
        (["--noise_mode", "label_noise", "--p", "0.2", "--sigma", "-1"], "--sigma"),
        (["--noise_mode", "label_noise", "--p", "0.2", "--placement", "middle"], "--placement"),
        (["--noise_mode", "label_noise"], "--p"),
        (["--eval_ordering", "bogus"], "--eval_ordering"),
    ],
)
def test_bad_grid_is_refused_before_any_run(tmp_path, capsys, bad, flag):
    import eval_noise
    import eval_order
    from src.gd_paper import sweep as sweep_module

    runs = tmp_path / "runs"
    defaults = eval_noise.DEFAULTS if "--p" in bad else eval_order.DEFAULTS
    argv = [*GRID[:2], *bad, *TINY, "--out", str(tmp_path / "r.csv"), "--runs-dir", str(runs)]
    try:
        code = sweep_module.main(defaults, argv)
    except SystemExit as exit_:
        code = exit_.code
    assert code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0] and "accepted" in lines[0], lines
    assert not runs.exists() and not (tmp_path / "r.csv").exists()


# ---------------------------------------------------------------------------
# Figures

FIELDS = [
    "run_dir",
    "status",
    "model",
    "seed",
    "ordering",
    "noise_mode",
    "p",
    "sigma",
    "placement",
    "train_ordering",
    "eval_ordering",
    "train_noise_mode",
    "eval_noise_mode",
    "train_noise_p",
    "eval_noise_p",
    "train_noise_sigma",
    "eval_noise_sigma",
    "train_noise_placement",
    "eval_noise_placement",
    "eval_loss",
    "gd_loss",
    "align_cos",
    "l2_pred_diff",
    "model_diff",
    "auroc",
]


def write_rows(path, rows):
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: row.get(k, "") for k in FIELDS})


def made_up_rows(tmp_path):
    rows = []
    for model in ("lsa1", "twolayer"):
        for seed in (0, 1):
            for ordering in ("random", "easy2hard"):
                for mode, p in (("clean", ""), ("label_noise", 0.0), ("label_noise", 0.3)):
                    run = RunDir(tmp_path / f"{model}_{ordering}_{mode}_{p}_{seed}")
                    run.path.mkdir()
                    (run.file(names.OOD)).parent.mkdir(parents=True, exist_ok=True)
                    (run.file(names.OOD)).write_text("alpha,tf_loss,gd_loss\n0.5,0.1,0.09\n1,0.21,0.2\n2,1.9,9.8\n")
                    noise = {} if mode == "clean" else {"p": p, "sigma": 0.5, "placement": "mixed"}
                    phase = {"noise_mode": mode, "ordering": ordering}
                    if noise:
                        phase.update(noise_p=p, noise_sigma=0.5, noise_placement="mixed")
                    row = {
                        "run_dir": str(run.path),
                        "status": "complete",
                        "model": model,
                        "seed": seed,
                        "ordering": ordering,
                        "noise_mode": mode,
                        **noise,
                        "eval_loss": 0.21 + 0.01 * seed + (0.2 * p if p else 0),
                        "gd_loss": 0.206,
                        "align_cos": 0.99,
                        "l2_pred_diff": 0.03,
                        "model_diff": 0.1,
                        "auroc": 0.6 + 0.1 * seed if p else "",
                    }
                    for key, value in phase.items():
                        row[f"train_{key}"] = row[f"eval_{key}"] = value
                    rows.append(row)
    return rows


def test_fig_templates_renders_every_figure(tmp_path):
    from plots.fig_templates import FIGURES, render_all

    source = tmp_path / "results.csv"
    write_rows(source, made_up_rows(tmp_path))
    written, skipped = render_all(source, tmp_path / "figs")
    assert skipped == []
    for name in FIGURES:
        data = (tmp_path / "figs" / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 5000


def test_fig_templates_skips_absent_data_with_a_reason(tmp_path, capsys):
    from plots.fig_templates import main

    source = tmp_path / "results.csv"
    rows = [
        {
            "run_dir": str(tmp_path / "nowhere"),
            "model": "lsa1",
            "seed": s,
            "ordering": "random",
            "train_ordering": "random",
            "eval_ordering": "random",
            "noise_mode": "clean",
            "train_noise_mode": "clean",
            "eval_noise_mode": "clean",
            "eval_loss": 0.21,
            "gd_loss": 0.206,
            "align_cos": 0.99,
            "l2_pred_diff": 0.03,
        }
        for s in (0, 1)
    ]
    write_rows(source, rows)
    out = tmp_path / "figs"
    out.mkdir()
    (out / "order_sensitivity.png").write_bytes(b"stale")
    assert main(["--from", str(source), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["alignment_metrics.png"]
    for name in ("order_sensitivity", "noise_robustness", "attention_separation", "ood_curve"):
        assert f"skipped {name}.png: " in printed
    assert main(["--from", str(tmp_path / "missing.csv"), "--out", str(out)]) == 2


def test_grid_over_any_setting_by_dotted_path(tmp_path):
    out = tmp_path / "g.csv"
    done = driver(
        "eval_order",
        "--models",
        "lsa1",
        "--ordering",
        "random",
        "--seeds",
        "0",
        "--grid",
        "train.adam_b2=0.98,0.999",
        *TINY,
        "--out",
        str(out),
        "--runs-dir",
        str(tmp_path / "runs"),
        "--jobs",
        "2",
        "--quiet",
        "--no_save_attention",
    )
    assert done.returncode == 0, done.stderr
    rows = read_csv(out)
    assert [r["train.adam_b2"] for r in rows] == ["0.98", "0.999"]
    for row in rows:
        stored = RunDir(row["run_dir"]).load_settings().train.adam_b2
        assert stored == float(row["train.adam_b2"])
        assert row["run_dir"].endswith(f"__train.adam_b2-{row['train.adam_b2']}__seed0")


@pytest.mark.parametrize(
    "grid, words",
    [
        ("train.nope=1,2", "'nope' is not a setting"),
        ("train.steps=10,x", "accepted: an integer"),
        ("train.steps", "PATH=V1,V2"),
    ],
)
def test_bad_grid_setting_is_refused_in_one_line(tmp_path, grid, words):
    done = driver(
        "eval_order",
        "--models",
        "lsa1",
        "--ordering",
        "random",
        "--grid",
        grid,
        *TINY,
        "--out",
        str(tmp_path / "g.csv"),
        "--runs-dir",
        str(tmp_path / "runs"),
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and words in lines[0], done.stderr
    assert not (tmp_path / "runs").exists()


def test_runs_of_other_settings_are_refused_naming_the_flag_as_the_user_types_it(sweep):
    """Another STEPS on the same runs directory: refused in one line that names --overwrite, and
    under make (MAKELEVEL set) the make variable that passes it (OVERWRITE=1)."""
    args = [a if a != "20" else "30" for a in sweep["args"]]  # --steps 30
    for make_level, words in ((None, "or --overwrite to retrain"), ("1", "--overwrite (make: OVERWRITE=1)")):
        env = {k: v for k, v in os.environ.items() if k != "MAKELEVEL"}
        env.update({"PYTHONPATH": str(ROOT), **({"MAKELEVEL": make_level} if make_level else {})})
        done = subprocess.run(
            [sys.executable, "-m", "eval_order", *args, "--dry_run"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and words in lines[0], done.stderr
