"""Hostile inputs and races, one class each (issue 42's probe): every case ends within 30 s, before
any work, in ONE line naming what is refused (exit 2), and loses nothing.

The table covers what a command line refuses on its own (include graphs that hang or explode,
FIFOs, symlink loops, JSON nested 100,000 deep, a port that is not Ray, flags without effect,
values the training precision cannot hold, tyro's boxes); the tests below it need a run first
(a NaN checkpoint, a finished or unfinished run, a run diverged in its first epoch). Two processes
at once on one run directory: tests/test_one_writer.py.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path

import numpy as np
import pytest

import eval_order
from analysis import alignment
from analysis import dynamics as dynamics_analysis
from scripts import mechanisms
from src.process import guarded
from src.cli import dynamics as dynamics_cli, gpt2 as gpt2_cli, lsa as lsa_cli, recipe as recipe_cli, rerun
from src.gd_paper import sweep

ROOT = Path(__file__).resolve().parent.parent
CLIS = {
    "train": gpt2_cli.main,
    "rerun": rerun.main,
    "runners.dynamics": dynamics_cli.main,
    "recipe": recipe_cli.main,
    "concat": lambda argv: lsa_cli.main("lsa1", "runner", argv),
    "eval_order": lambda argv: sweep.main(eval_order.DEFAULTS, argv),
    "mechanisms": mechanisms.main,
    "alignment": alignment.main,
    "analysis.dynamics": dynamics_analysis.main,
}
LIMIT_S = 30


# -- what the table's cases are given (files made in tmp_path) ---------------------------------


def exponential_includes(folder: Path) -> str:
    """f0 includes f1 twice, f1 includes f2 twice, ... 30 levels: 2^30 copies if expanded."""
    for i in range(30):
        (folder / f"f{i}.yaml").write_text(f"a: !include f{i + 1}.yaml\nb: !include f{i + 1}.yaml\n")
    (folder / "f30.yaml").write_text("x: 1\n")
    return str(folder / "f0.yaml")


def include_chain(folder: Path, depth: int = 200) -> str:
    for i in range(depth):
        (folder / f"c{i}.yaml").write_text(f"model: !include c{i + 1}.yaml\n")
    (folder / f"c{depth}.yaml").write_text("x: 1\n")
    return str(folder / "c0.yaml")


def include_of_a_fifo(folder: Path) -> str:
    os.mkfifo(folder / "fifo.yaml")
    (folder / "top.yaml").write_text("model: !include fifo.yaml\n")
    return str(folder / "top.yaml")


def symlink_loop(folder: Path) -> Path:
    os.symlink(folder / "loop_b.yaml", folder / "loop_a.yaml")
    os.symlink(folder / "loop_a.yaml", folder / "loop_b.yaml")
    return folder / "loop_a.yaml"


def include_of_a_symlink_loop(folder: Path) -> str:
    symlink_loop(folder)
    (folder / "top.yaml").write_text("model: !include loop_a.yaml\n")
    return str(folder / "top.yaml")


def deep_json(folder: Path) -> str:
    (folder / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    return str(folder / "deep.json")


def empty_out_dir(folder: Path) -> str:
    text = (ROOT / "configs" / "quick.yaml").read_text().replace("out_dir: ./runs/quick", "out_dir: ''")
    (folder / "empty_out.yaml").write_text(text)
    return str(folder / "empty_out.yaml")


def seeds_together(folder: Path, outs: list[str]) -> str:
    """A --together file: lsa1's seeds 0, 1, ... trained into `outs`."""
    from src.gd_paper.presets import preset

    settings = preset("lsa1").to_dict()
    runs = [
        {"settings": {**settings, "train": {**settings["train"], "seed": seed}}, "out": out}
        for seed, out in enumerate(outs)
    ]
    (folder / "group.json").write_text(json.dumps({"runs": runs}))
    return str(folder / "group.json")


def same_out_twice(folder: Path) -> str:
    return seeds_together(folder, [str(folder / "same")] * 2)


def unwritable_group(folder: Path) -> str:
    """Two seeds trained together into a place no one may write (/sys refuses even root)."""
    return seeds_together(folder, [f"/sys/icl-workbench-test/seed{seed}" for seed in (0, 1)])


def silent_port(folder: Path) -> str:
    """A port that accepts connections and never says a word (held open for the session)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    _KEEP.append(server)
    return f"127.0.0.1:{server.getsockname()[1]}"


_KEEP: list = []
QUICK = ["--config", "configs/quick.yaml", "--set", "quick=false"]

# (cli, argv with {NAME} filled by the function of that name, a word the one line must contain)
CASES = [
    # hangs
    ("train", ["--config", "{exponential_includes}"], "expand"),
    ("train", ["--config", "{include_of_a_fifo}"], "regular file"),
    ("eval_order", ["--executor", "ray", "--address", "{silent_port}"], "--address"),
    # "unexpected" errors
    ("train", ["--config", "{include_of_a_symlink_loop}"], "Symlink loop"),
    ("train", ["--config", "{symlink_loop}"], "Symlink loop"),
    ("train", ["--config", "{include_chain}"], "32 files deep"),
    ("rerun", ["--config", "{deep_json}"], "nested deeper"),
    ("rerun", ["--together", "{same_out_twice}"], "both write into"),
    # late checks and bad input accepted
    ("concat", ["--out", "/sys/icl-workbench-test-run"], "cannot be written"),
    ("rerun", ["--together", "{unwritable_group}"], "cannot be written"),
    ("concat", ["--resume", "--overwrite"], "none is kept"),
    ("train", ["--config", "{empty_out_dir}"], "out_dir"),
    ("train", ["--out", ""], "--out"),
    (
        "train",
        [*QUICK, "--set", "training.curriculum.points.start=5", "--set", "training.curriculum.points.inc=0"],
        "inc",
    ),
    ("train", [*QUICK, "--set", f"training.log_every={10**12}"], "log_every"),
    ("recipe", ["task:mqar", "--train.checkpoint_every", str(10**12)], "checkpoint_every"),
    ("runners.dynamics", ["--log_every", str(10**12)], "log_every"),
    ("recipe", ["task:mqar", "--pairs.n_dims", "6"], "--pairs.n_dims"),
    ("runners.dynamics", ["--model", "attnS", "--cubic_feat"], "--cubic_feat"),
    ("runners.dynamics", ["--init", "1e300"], "--init"),
    ("concat", ["--lr", "1e300"], "lr"),
    # tyro's boxes, in one line
    ("recipe", ["task:mqar", "task:parity"], "already chosen"),
    ("recipe", ["model.seq_mixer:attention", "model.seq_mixer:linear_attention"], "already chosen"),
    ("recipe", ["--train.train_steps", "10", "extra"], "extra"),
    ("recipe", ["--quiet=yes"], "--quiet"),
    ("recipe", ["--out"], "--out"),
]


class TookTooLong(Exception):
    pass


def _alarm(signum, frame):
    raise TookTooLong(f"no answer within {LIMIT_S} s")


def one_line_refusal(cli: str, argv: list[str], capsys) -> str:
    """Run a command in-process (as `guarded` runs it), at most LIMIT_S seconds; its one line."""
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(LIMIT_S)
    try:
        code = guarded(lambda: CLIS[cli](argv))
    except SystemExit as exit_:
        code = exit_.code
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert code == 2, (cli, argv, code, err)
    assert len(lines) == 1, (cli, argv, err)
    assert "Traceback" not in err and "unexpected" not in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize(
    "cli,argv,word", CASES, ids=[f"{i:02d}-{c}-{'_'.join(a)[:40]}" for i, (c, a, _) in enumerate(CASES)]
)
def test_a_hostile_input_is_one_line_within_seconds(cli, argv, word, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    made = tmp_path / "made"
    made.mkdir()
    filled = []
    for arg in argv:
        if arg.startswith("{") and arg.endswith("}"):
            arg = str(globals()[arg[1:-1]](made))
        filled.append(arg)
    if (
        cli in ("train", "recipe", "runners.dynamics", "concat")
        and "--out" not in filled
        or cli == "rerun"
        and "--config" in filled
    ):
        filled += ["--out", str(tmp_path / "run")]
    if cli == "eval_order":
        filled += ["--out", str(tmp_path / "r.csv"), "--runs-dir", str(tmp_path / "runs")]
    before = sorted(os.listdir(tmp_path))
    begin = time.monotonic()
    line = one_line_refusal(cli, filled, capsys)
    assert word in line, (word, line)
    assert time.monotonic() - begin < LIMIT_S
    assert sorted(os.listdir(tmp_path)) == before, "a refused command created files"


# -- cases that need a run first -----------------------------------------------------------------

TINY = [
    "--steps",
    "40",
    "--batch_size",
    "32",
    "--eval_size",
    "50",
    "--log_every",
    "20",
    "--quiet",
    "--set",
    "train.checkpoint_every=20",
]


def lsa_run(out: Path, *extra: str) -> None:
    assert lsa_cli.main("lsa1", "runner", [*TINY, *extra, "--out", str(out)]) == 0


def test_resume_from_a_checkpoint_with_nan_parameters_is_refused_and_rundir_says_corrupt(tmp_path, capsys):
    from src.rundir.__main__ import check_main

    out = tmp_path / "run"
    lsa_run(out)
    (out / "metrics_summary.json").unlink()  # as if it had been stopped after its checkpoint
    with np.load(out / "checkpoint.npz") as data:
        arrays = {k: data[k] for k in data.files}
    arrays["params/0000"] = np.full_like(arrays["params/0000"], np.nan)  # the settings digest intact
    np.savez(out / "checkpoint.npz", **arrays)
    capsys.readouterr()
    line = one_line_refusal("concat", [*TINY, "--out", str(out), "--resume"], capsys)
    assert "not finite" in line and not (out / "metrics_summary.json").exists()
    with np.load(out / "params.npz") as data:
        params = {k: data[k] for k in data.files}
    first = sorted(params)[0]
    np.savez(out / "params.npz", **{**params, first: np.full_like(params[first], np.nan)})
    assert check_main([str(out)]) == 1
    assert "not finite" in capsys.readouterr().err


def test_resume_of_a_finished_run_is_refused_and_changes_nothing(tmp_path, capsys):
    out = tmp_path / "run"
    lsa_run(out)
    before = {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    capsys.readouterr()
    line = one_line_refusal("concat", [*TINY, "--out", str(out), "--resume"], capsys)
    assert "has finished" in line
    assert {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_an_analysis_of_a_run_that_never_finished_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    lsa_run(out)
    (out / "metrics_summary.json").unlink()
    capsys.readouterr()
    assert "has not finished" in one_line_refusal("alignment", ["--run", str(out)], capsys)


def test_a_dynamics_run_diverged_in_its_first_epoch_is_analysed_in_one_line(tmp_path, capsys):
    out = tmp_path / "run"
    argv = [
        "--model",
        "attnS",
        "--head",
        "2",
        "--in_dim",
        "3",
        "--seq_len",
        "6",
        "--trainset_size",
        "50",
        "--epoch",
        "20",
        "--init",
        "1e20",
        "--quiet",
        "--out",
        str(out),
    ]
    assert dynamics_cli.main(argv) == 1  # diverged, said so
    err = capsys.readouterr().err
    assert "SLASCL" not in err and "illegal value" not in err  # LAPACK never saw the overflowed W_KQ
    summary = json.loads((out / "metrics_summary.json").read_text())
    assert all((out / name).exists() for name in summary["outputs"] if not name.startswith("analysis"))
    assert "first epoch" in one_line_refusal("analysis.dynamics", ["--run", str(out)], capsys)


def test_a_full_disk_names_the_file(tmp_path, monkeypatch):
    import errno
    from src import files

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", full)
    with pytest.raises(OSError) as caught:
        files.atomic_write_text(tmp_path / "metrics.jsonl", "x\n")
    assert caught.value.filename == str(tmp_path / "metrics.jsonl") and caught.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []


def test_the_studies_find_their_configs_from_any_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WORKBENCH_DRY_RUN", "1")
    code = mechanisms.main(["--quick", "--runs-dir", str(tmp_path / "runs"), "--report-dir", str(tmp_path / "r")])
    assert code == 0, capsys.readouterr().err
    assert "dry run" in capsys.readouterr().out
