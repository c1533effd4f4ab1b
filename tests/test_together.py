"""Seeds trained together (src/together.py) write what training each seed alone writes, to float32
rounding (floats within 1e-6), and fall back to training alone when one diverges."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import numpy as np
import pytest

from src.cli.gpt2 import read_config
from src.pipeline import execute, execute_together
from src.rundir import RunDir, names
from src.together import together_refusal

TINY = [
    "model.n_embd=16",
    "model.n_layer=1",
    "model.n_head=2",
    "training.train_steps=30",
    "training.log_every=10",
    "training.save_every_steps=20",
    "training.keep_every_steps=20",
    "training.eval_size=32",
    "quick=false",
]
WALL_TIMES = {"elapsed_s", "train_seconds"}
NUMBER = re.compile(r"-?\d+\.?\d*(?:e[-+]?\d+)?|nan|-?inf")
TOLERANCE = 1e-6  # float32 rounding: the batched program's sums are not the single one's


def tiny(seed: int, *sets: str):
    settings, _ = read_config("configs/quick.yaml", [*TINY, *sets])
    return replace(settings, train=replace(settings.train, seed=seed)).validate()


def contents(path) -> dict:
    """Every file of a run directory as comparable values (no wall times, no provenance, no
    figures): JSON as objects, arrays as float64, text as its words and numbers."""
    run, out = RunDir(path), {}
    for file in sorted(str(p.relative_to(run.path)) for p in run.path.rglob("*") if p.is_file()):
        if file.endswith(".png"):
            continue  # figures of the numbers compared here
        if file == names.CONFIG:
            out[file] = run.load_config()["settings"]
        elif file.endswith(".npz"):
            out[file] = {
                k: np.asarray(v, np.float64) if v.dtype.kind == "f" else v.tobytes()
                for k, v in run.load_arrays(file).items()
            }
        elif file.endswith(".npy"):
            array = np.load(run.file(file))
            out[file] = np.asarray(array, np.float64) if array.dtype.kind == "f" else array.tobytes()
        elif file == names.METRICS:
            out[file] = [{k: v for k, v in r.items() if k not in WALL_TIMES} for r in run.read_metrics()]
        elif file.endswith(".json"):
            out[file] = drop_wall_times(run.load_json(file))
        else:
            text = run.file(file).read_text()
            out[file] = (NUMBER.sub("#", text), [float(x) for x in NUMBER.findall(text)])
    return out


def drop_wall_times(value):
    if isinstance(value, dict):
        return {k: drop_wall_times(v) for k, v in value.items() if k not in WALL_TIMES}
    return [drop_wall_times(v) for v in value] if isinstance(value, list) else value


def assert_close(expected, got, where: str = "") -> None:
    """Equal structure and equal values, floats within TOLERANCE (relative above 1)."""
    if isinstance(expected, dict):
        assert sorted(got) == sorted(expected), where
        for key in expected:
            assert_close(expected[key], got[key], f"{where}/{key}")
    elif isinstance(expected, (list, tuple)):
        assert len(got) == len(expected), where
        for i, (e, g) in enumerate(zip(expected, got)):
            assert_close(e, g, f"{where}[{i}]")
    elif isinstance(expected, np.ndarray):
        assert got.shape == expected.shape, where
        np.testing.assert_allclose(got, expected, rtol=TOLERANCE, atol=TOLERANCE, err_msg=where)
    elif isinstance(expected, float) and not isinstance(got, bool):
        assert abs(got - expected) <= TOLERANCE * max(1.0, abs(expected)) or got == expected, (
            f"{where}: {got!r} != {expected!r}"
        )
    else:
        assert got == expected, where


def train_both(tmp_path, settings_list):
    """Run directories of each seed trained alone, and of the seeds trained together (no analyses:
    they read the files compared here, through the same code)."""
    flags = dict(runner="test", argv=[], progress=False, analyses=())
    alone = [execute(s, tmp_path / f"alone{i}", **flags).run.path for i, s in enumerate(settings_list)]
    together = [
        o.run.path
        for o in execute_together(
            settings_list, [tmp_path / f"together{i}" for i in range(len(settings_list))], **flags
        )
    ]
    return alone, together


@pytest.mark.study  # four compilations of the GPT-2 chunk (~22 s): make test_studies
def test_seeds_together_write_what_each_seed_alone_writes(tmp_path):
    favor = "model.attention_type=favor"  # Haiku state (random features) per seed
    alone, together = train_both(tmp_path, [tiny(0, favor), tiny(3, favor)])
    for a, t in zip(alone, together):
        expected, got = contents(a), contents(t)
        assert {names.CHECKPOINT, names.kept_checkpoint(20), names.PARAMS, names.METRICS} <= set(got)
        assert_close(expected, got)  # losses, metrics, parameters, checkpoints, analyses
    first = [r["eval_error_last"] for r in contents(together[0])[names.METRICS]]
    second = [r["eval_error_last"] for r in contents(together[1])[names.METRICS]]
    assert first != second  # two seeds, two trainings


def paper_system(seed: int, **train):
    """The paper's lsa1 at a tiny size (compiles in about a second)."""
    from src.gd_paper.presets import preset

    base = preset("lsa1")
    return replace(
        base, train=replace(base.train, steps=20, log_every=10, batch_size=64, eval_size=100, seed=seed, **train)
    ).validate()


def test_a_diverging_seed_sends_the_group_back_to_training_alone(tmp_path):
    alone, together = train_both(tmp_path, [paper_system(0, learning_rate=1e9), paper_system(1, learning_rate=1e9)])
    for a, t in zip(alone, together):
        summary = json.loads((t / names.SUMMARY).read_text())
        assert summary["status"] == "diverged"
        assert_close(contents(a), contents(t))


@pytest.mark.parametrize(
    "change, why",
    [
        (lambda s: [s, replace(s, train=replace(s.train, learning_rate=1e-2))], "more than train.seed"),
        (lambda s: [s, s], "repeats"),
        (lambda s: [s], "at least 2"),
    ],
)
def test_only_runs_that_differ_in_their_seed_train_together(change, why):
    assert why in together_refusal(change(tiny(0)))


def test_a_system_without_seed_parts_is_refused():
    from src.systems.dynamics import DynamicsSettings

    settings = DynamicsSettings().validate()
    other = replace(settings, train=replace(settings.train, seed=1))
    assert "does not train seeds together" in together_refusal([settings, other])


def test_the_paper_systems_seeds_together_agree_with_each_alone(tmp_path):
    alone, together = train_both(tmp_path, [paper_system(0), paper_system(1)])
    for a, t in zip(alone, together):
        assert_close(contents(a), contents(t))


@pytest.mark.study  # a child process that compiles and analyses: make test_studies
def test_the_job_engine_trains_a_group_in_one_process(tmp_path):
    from src.jobs.engine import GroupJob, Job, group_seeds, plan, run_jobs

    jobs = plan(
        [Job(f"seed{s}", tiny(s), tmp_path / f"seed{s}") for s in (0, 1)]
        + [Job("other_rate", tiny(0, "training.learning_rate=0.002"), tmp_path / "other_rate")]
    )
    groups = group_seeds(jobs)
    assert [type(g) for g in groups] == [GroupJob, Job]
    assert [m.name for m in groups[0].members] == ["seed0", "seed1"]
    said = []
    from src.jobs.local import LocalExecutorOptions
    from src.registry import Choice

    report = run_jobs(
        jobs[:2],
        workers=1,
        runs_dir=tmp_path,
        say=said.append,
        executor=Choice("local", LocalExecutorOptions(seeds_together=True)),
    )
    assert [j.name for j in report.trained] == ["seed0", "seed1"] and not report.failed, said
    assert (tmp_path / "logs" / "seed0+1.log").read_text().startswith("$ ")
    assert "--together" in (tmp_path / "logs" / "seed0+1.log").read_text().splitlines()[0]
    assert [j.state for j in plan(jobs[:2])] == ["complete", "complete"]
