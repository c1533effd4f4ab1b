"""The training-dynamics paper's command line (`python -m runners.dynamics`, src/cli/dynamics.py):
bad flags exit 2 in one line and make nothing; the original's README commands run, one by one and
in its loops, each into a run directory named as the original names its file."""

import json

import numpy as np
import pytest

from src import rundir as names
from src.cli.dynamics import main as dynamics_main
from src.rundir import RunDir


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--model", "attnS", "--rank", "5", "--in_dim", "4"], "rank"),
        (["--in_dim", "0"], "--in_dim"),
        (["--trainset_size", "-3"], "--trainset_size"),
        (["--epoch", "0"], "--epoch"),
        (["--icl", "1.5"], "--icl"),
        (["--icl", "-0.1"], "--icl"),
        (["--model", "mlp"], "--cubic_feat"),
        (["--lr", "0"], "--lr"),
        (["--init", "nan"], "--init"),
        (["--model", "attnX"], "--model"),
        (["--rank", "2"], "--rank"),
        (["--icl", "c"], '--icl "$c"'),
        (["--softmax", "--normalize"], "--softmax"),
        (["--vary_len", "--optimizer", "sgd", "--batch_size", "10"], "--vary_len"),
        (["--track_value", "--model", "mlp", "--cubic_feat"], "--track_value"),
        (["--out_dim", "2"], "--out_dim"),
        (["--model", "attnS", "--restricted"], "--restricted"),
        (["--init_convention", "big"], "--init_convention"),
    ],
)
def test_bad_flags_exit_2_with_one_line(flags, words, tmp_path, capsys):
    out = tmp_path / "never"
    try:
        code = dynamics_main([*flags, "--out", str(out)])
    except SystemExit as exit_:
        code = exit_.code
    assert code == 2 and not out.exists()
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], lines


@pytest.mark.parametrize(
    "argv",
    [
        ["--model", "attnM", "--head", "8", "--init", "1e-6", "--show"],
        ["--model", "mlp", "--cubic_feat", "--head", "8", "--init", "1e-6", "--show"],
        ["--model", "attnS", "--head", "5", "--init", "1e-2", "--epoch", "10001", "--lr", "0.02", "--show"],
        [
            "--model",
            "attnS",
            "--head",
            "9",
            "--KQ_dim",
            "1",
            "--in_dim",
            "8",
            "--seq_len",
            "32",
            "--init",
            "5e-3",
            "--trainset_size",
            "80000",
            "--epoch",
            "20001",
            "--lr",
            "0.02",
        ],
        [
            "--model",
            "attnM",
            "--icl",
            "0.4",
            "--head",
            "8",
            "--testset",
            "5000",
            "--init",
            "1e-6",
            "--white_cov",
            "--lr",
            "0.0005",
            "--epoch",
            "4001",
        ],
    ],
)
def test_the_seed_command_lines_run(argv, tmp_path):
    """The original's README commands (sizes cut by trailing flags; argparse keeps the last)."""
    out = tmp_path / "run"
    small = ["--epoch", "60", "--trainset_size", "300", "--log_every", "20", "--quiet"]
    small += ["--testset", "40"] if "--testset" in argv else []
    assert dynamics_main([*argv, *small, "--out", str(out)]) == 0
    run = RunDir(out)
    assert run.is_trained() and run.is_complete()
    summary = run.load_json(names.SUMMARY)
    assert summary["epochs"] == 60 and summary["status"] == "complete"
    with np.load(out / names.DYNAMICS, allow_pickle=False) as dyn:
        assert dyn["loss"].shape == (60,) and dyn["singular_values"].shape[0] == 4
        if "--testset" in argv:
            assert dyn["test_icl_loss"].shape == dyn["test_iwl_loss"].shape == (60,)
    assert ("--show" in argv) == (out / names.LOSS_PNG).exists()
    json.loads((out / names.DYNAMICS_JSON).read_text())


def test_readme_loops_make_one_run_each_named_as_the_original(tmp_path, monkeypatch, capsys):
    """`for r in 8 4 2 1; do ... --KQ_dim "$r" ...` and the --icl loop: one run per iteration
    under runs/dynamics/<the original's file name>, and its loss text file in it."""
    monkeypatch.chdir(tmp_path)
    small = ["--epoch", "30", "--log_every", "10", "--quiet"]
    for r in ("2", "1"):
        assert (
            dynamics_main(
                [
                    "--model",
                    "attnS",
                    "--head",
                    "9",
                    "--KQ_dim",
                    r,
                    "--in_dim",
                    "4",
                    "--seq_len",
                    "8",
                    "--init",
                    "5e-3",
                    "--trainset_size",
                    "200",
                    *small,
                ]
            )
            == 0
        )
    for c in ("0", "0.4"):
        assert (
            dynamics_main(
                [
                    "--model",
                    "attnM",
                    "--icl",
                    c,
                    "--head",
                    "8",
                    "--testset",
                    "50",
                    "--init",
                    "1e-6",
                    "--white_cov",
                    "--lr",
                    "0.0005",
                    "--trainset_size",
                    "200",
                    *small,
                ]
            )
            == 0
        )
    made = sorted(p.name for p in (tmp_path / "runs/dynamics").iterdir())
    assert made == [
        "attnM_head8_D4_R1_P200_N32_seed0_icl0.0",
        "attnM_head8_D4_R1_P200_N32_seed0_icl0.4",
        "attnS_head9_D4_R1_P200_N8_seed0",
        "attnS_head9_D4_R2_P200_N8_seed0",
    ]
    out = capsys.readouterr().out
    assert all(f"-> runs/dynamics/{name}" in out for name in made)
    run = tmp_path / "runs/dynamics" / made[1]
    table = np.loadtxt(run / f"{made[1]}.txt")
    with np.load(run / names.DYNAMICS, allow_pickle=False) as dyn:
        assert table.shape == (30, 3)
        assert np.array_equal(table[:, 0], dyn["loss"]) and np.array_equal(table[:, 1], dyn["test_iwl_loss"])
        assert np.array_equal(table[:, 2], dyn["test_icl_loss"])
    loss_only = np.loadtxt(tmp_path / "runs/dynamics" / made[3] / f"{made[3]}.txt")
    assert loss_only.shape == (30,)
    before = (run / names.SUMMARY).read_bytes()  # the same command again: refused, kept
    assert (
        dynamics_main(
            [
                "--model",
                "attnM",
                "--icl",
                "0.4",
                "--head",
                "8",
                "--testset",
                "50",
                "--init",
                "1e-6",
                "--white_cov",
                "--lr",
                "0.0005",
                "--trainset_size",
                "200",
                *small,
            ]
        )
        == 2
    )
    assert (run / names.SUMMARY).read_bytes() == before
