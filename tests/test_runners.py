"""Runners: complete run directories, one-line errors before any work, safe interruption."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from src import rundir as names
from src.rundir import RunDir

ROOT = Path(__file__).resolve().parent.parent
TINY = ["--steps", "40", "--batch_size", "128", "--eval_size", "300", "--log_every", "20", "--quiet"]
SUMMARY_KEYS = {
    "model",
    "steps",
    "eval_loss",
    "gd_loss",
    "gd_eta",
    "align_cos",
    "l2_pred_diff",
    "model_diff",
    "train_seconds",
}
METRIC_KEYS = {"step", "train_loss", "eval_loss", "gd_loss", "align_cos", "l2_pred_diff", "elapsed_s"}


class Result:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def run_cli(module, *args, capsys=None):
    """Call a runner's main() in-process (same code path as `python -m`, without the
    interpreter start-up) and capture its exit code and output."""
    import importlib

    capsys.readouterr()
    try:
        code = importlib.import_module(module).main(list(args))
    except SystemExit as exit_:  # argparse errors
        code = exit_.code
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)


@pytest.mark.parametrize("module", ["runners.run_concat_inputs_targets", "runners.run_softmax_copy"])
def test_run_directory_is_complete(tmp_path, module, capsys):
    out = tmp_path / "run"
    proc = run_cli(
        module,
        "--out",
        str(out),
        "--save_attention",
        "--noise_mode",
        "label_noise",
        "--noise_p",
        "0.2",
        "--eval_ordering",
        "easy2hard",
        *TINY,
        capsys=capsys,
    )
    assert proc.returncode == 0, proc.stderr
    run = RunDir(out)
    for name in (
        names.CONFIG,
        names.METRICS,
        names.SUMMARY,
        names.PARAMS,
        names.ORDERING,
        names.NOISE_MASK,
        f"{names.ANALYSIS}/{names.ORDERING}",
        f"{names.ANALYSIS}/{names.NOISE_MASK}",
        names.METADATA,
        names.ATTN_RAW,
        names.attention_file(0, 0),
    ):
        assert run.exists(name), name
    summary = run.load_json(names.SUMMARY)
    assert SUMMARY_KEYS <= set(summary) and summary["status"] == "complete"
    rows = run.read_metrics()
    assert [r["step"] for r in rows] == [20, 40] and all(METRIC_KEYS <= set(r) for r in rows)
    assert np.load(run.file(names.NOISE_MASK)).sum(axis=1).tolist() == [2] * 300
    with np.load(run.file(names.PARAMS), allow_pickle=False) as params:
        assert all(k.startswith("transformer/") for k in params.files)
    # config.json is enough to rebuild the settings and rerun the run
    config = run.load_config()
    assert run.load_settings().train.steps == 40 and "--out" in config["argv"]
    assert config["versions"]["jax"] and config["command"].startswith("python -m runners.")
    assert len(config["code_fingerprint"]) == 16
    if module.endswith("softmax_copy"):
        assert {"copy_own", "copy_next", "copy_other"} <= set(summary)
    assert not list(out.rglob("*.tmp"))


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--noise_mode", "label_noise", "--noise_p", "1.5"], "--noise_p"),
        (["--noise_mode", "label_noise", "--noise_p", "0.2", "--noise_sigma", "-1"], "--noise_sigma"),
        (["--ordering", "sideways"], "--ordering"),
        (["--eval_noise_p", "0.2"], "--eval_noise_p"),
        (["--noise_mode", "random_pairs"], "--noise_p"),
        (["--steps", "0"], "--steps"),
        (["--lr", "nan"], "--lr"),
        (["--adam_b2", "1.0"], "--adam_b2"),
    ],
)
def test_bad_flags_fail_fast_with_one_line(tmp_path, flags, words, capsys):
    out = tmp_path / "never"
    start = time.time()
    proc = run_cli("runners.run_concat_inputs_targets", "--out", str(out), *flags, capsys=capsys)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], proc.stderr
    assert not out.exists()
    assert time.time() - start < 10  # refused before any training or compilation


def test_existing_out_is_refused_and_untouched(tmp_path, capsys):
    out = tmp_path / "existing"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    proc = run_cli("runners.run_softmax_copy", "--out", str(out), *TINY, capsys=capsys)
    assert proc.returncode == 2 and "--overwrite" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert [p.name for p in out.iterdir()] == ["precious.txt"]
    assert (out / "precious.txt").read_text() == "keep me"


def test_ctrl_c_leaves_no_half_written_file(tmp_path):
    out = tmp_path / "interrupted"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "runners.run_concat_inputs_targets",
            "--out",
            str(out),
            "--steps",
            "100000",
            "--batch_size",
            "64",
            "--eval_size",
            "200",
            "--log_every",
            "10",
            "--quiet",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # a shell that started pytest in the background ignores SIGINT, and
        # children inherit that: give the runner the default handler back
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.time() + 120
    while time.time() < deadline and not (out / names.METRICS).exists():
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert ("with --resume" in err) == (out / names.CHECKPOINT).is_file()  # offered only if true
    assert not list(out.rglob("*.tmp")) and not list(out.rglob(".*.tmp"))
    assert not (out / names.SUMMARY).exists()
    json.loads((out / names.CONFIG).read_text())
    assert all(json.loads(line) for line in (out / names.METRICS).read_text().splitlines())
    assert not RunDir(out).is_trained()


def test_adam_b2_defaults_to_the_reference_code_and_can_be_set():
    from src.cli.lsa import build_parser, settings_from_args

    parser = build_parser("prog", "test", "twolayer")
    assert settings_from_args(parser.parse_args([]), "twolayer").train.adam_b2 == 0.98
    chosen = settings_from_args(parser.parse_args(["--adam_b2", "0.999"]), "twolayer")
    assert chosen.train.adam_b2 == 0.999


# --overwrite deletes only what it can prove is a run directory it made (marker + config).


def test_overwrite_refuses_the_working_directory(tmp_path, capsys, monkeypatch):
    keep = tmp_path / "checkout"
    keep.mkdir()
    (keep / ".git").mkdir()
    (keep / "notes.txt").write_text("keep me")
    monkeypatch.chdir(keep)
    proc = run_cli("runners.run_concat_inputs_targets", "--out", ".", "--overwrite", *TINY, capsys=capsys)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "working directory" in proc.stderr
    assert sorted(p.name for p in keep.iterdir()) == [".git", "notes.txt"]


@pytest.mark.parametrize("target", [".", "..", "/"])
def test_overwrite_refuses_repository_and_roots(target, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    before = sorted(p.name for p in ROOT.iterdir())
    proc = run_cli("runners.run_concat_inputs_targets", "--out", target, "--overwrite", *TINY, capsys=capsys)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert sorted(p.name for p in ROOT.iterdir()) == before


def test_overwrite_refuses_a_users_directory_and_file(tmp_path, capsys):
    folder = tmp_path / "thesis"
    folder.mkdir()
    (folder / "chapter1.tex").write_text("precious")
    (folder / "config.json").write_text('{"settings": {}}')  # looks like a run, no marker
    proc = run_cli("runners.run_concat_inputs_targets", "--out", str(folder), "--overwrite", *TINY, capsys=capsys)
    assert proc.returncode == 2 and "not a run directory" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert (folder / "chapter1.tex").read_text() == "precious"
    a_file = tmp_path / "data.csv"
    a_file.write_text("1,2\n")
    proc = run_cli("runners.run_concat_inputs_targets", "--out", str(a_file), "--overwrite", *TINY, capsys=capsys)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert a_file.read_text() == "1,2\n"


def test_overwrite_replaces_our_own_run_directory(tmp_path, capsys):
    out = tmp_path / "run"
    assert run_cli("runners.run_concat_inputs_targets", "--out", str(out), *TINY, capsys=capsys).returncode == 0
    assert RunDir(out).is_ours()
    (out / "stale_extra.txt").write_text("from the old run")
    proc = run_cli("runners.run_concat_inputs_targets", "--out", str(out), "--overwrite", *TINY, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    assert not (out / "stale_extra.txt").exists() and RunDir(out).is_trained()
    # a run directory whose config.json is unreadable is no longer provably ours
    (out / names.CONFIG).write_text("{truncated")
    proc = run_cli("runners.run_concat_inputs_targets", "--out", str(out), "--overwrite", *TINY, capsys=capsys)
    assert proc.returncode == 2 and (out / names.PARAMS).exists()


def test_analyses_names_the_analyses_a_run_makes_at_its_end(tmp_path, capsys):
    """runners.run --analyses: only those run (and the summary's outputs name only them, so the run
    is complete); a name that does not apply, or with --skip_analysis, is refused in one line."""
    from dataclasses import replace
    from src.systems.lsa import LSASettings

    settings = LSASettings()
    settings = replace(settings, train=replace(settings.train, steps=10, log_every=5, eval_size=50, batch_size=16))
    config = tmp_path / "lsa.json"
    config.write_text(json.dumps({"settings": settings.validate().to_dict()}))
    out = tmp_path / "run"
    bad = run_cli(
        "runners.run", "--config", str(config), "--out", str(out), "--analyses", "inductive_bias", capsys=capsys
    )
    assert (
        bad.returncode == 2
        and "accepted: a comma list of the analyses that apply to this run: alignment, ood" in bad.stderr
        and len(bad.stderr.strip().splitlines()) == 1
        and not out.exists()
    )
    both = run_cli(
        "runners.run",
        "--config",
        str(config),
        "--out",
        str(out),
        "--analyses",
        "alignment",
        "--skip_analysis",
        capsys=capsys,
    )
    assert both.returncode == 2 and not out.exists()
    done = run_cli(
        "runners.run", "--config", str(config), "--out", str(out), "--analyses", "alignment", "--quiet", capsys=capsys
    )
    assert done.returncode == 0, done.stderr
    outputs = json.loads((out / "metrics_summary.json").read_text())["outputs"]
    assert "analysis/alignment.json" in outputs and not any("ood" in o for o in outputs)
    assert (out / "analysis" / "alignment.json").exists() and not list((out / "analysis").glob("ood*"))
    assert RunDir(out).missing_outputs() == []
