"""The shared command-line pieces: typed flags name the value and what is accepted; an
unexpected exception becomes one line and a traceback file, exit 1."""

import re

import pytest

from src.flags import OneLineParser, int_at_least, number_in, seed
from src.process import guarded


def test_typed_flags_one_line(capsys):
    parser = OneLineParser(prog="prog")
    parser.add_argument("--steps", type=int_at_least(1))
    parser.add_argument("--p", type=number_in(0, 1))
    parser.add_argument("--seed", type=seed())
    for argv, words in (
        (["--steps", "0"], "'0' is out of range; accepted: an integer >= 1"),
        (["--steps", "x"], "'x' is not an integer"),
        (["--p", "nan"], "accepted: a number in [0, 1]"),
        (["--seed", str(2**63)], "accepted: an integer in [0, 4294967295]"),
    ):
        with pytest.raises(SystemExit) as exit_:
            parser.parse_args(argv)
        assert exit_.value.code == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and words in lines[0], lines


def test_unexpected_exception_is_one_line_and_a_log(capsys):
    def broken():
        raise RuntimeError("something deep\nwith a second line")

    assert guarded(broken) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "unexpected RuntimeError: something deep" in lines[0]
    log = re.search(r"full traceback: (\S+);", lines[0]).group(1)
    assert "Traceback" in open(log).read()
    assert guarded(lambda: 0) == 0


def test_a_usage_error_raised_inside_main_is_one_line_and_exit_2(capsys):
    from src.flags import UsageError

    def refuses():
        raise UsageError("--steps=0 is not accepted; accepted: an integer >= 1")

    assert guarded(refuses) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith("error: --steps=0 is not accepted; accepted: an integer >= 1")


def test_the_paper_runners_name_default_runs_by_the_flags_that_differ():
    """runs/<model>[_<flag><value>...]_seed<seed>: a loop over any flag makes one run per value;
    output-only flags (--save_attention, --quiet) do not change the name."""
    from src.cli.lsa import build_parser, default_out

    parser = build_parser("python -m runners.run_concat_inputs_targets", "", "lsa1")
    name = lambda *argv: str(default_out(parser, parser.parse_args(list(argv)), "lsa1"))
    assert name() == "runs/lsa1_seed0" == name("--save_attention", "--quiet")
    loop = [name("--ordering", o, "--seed", "1") for o in ("random", "easy2hard", "hard2easy")]
    assert loop == ["runs/lsa1_seed1", "runs/lsa1_orderingeasy2hard_seed1", "runs/lsa1_orderinghard2easy_seed1"]
    assert name("--steps", "300", "--lr", "0.01") == "runs/lsa1_steps300_lr0.01_seed0"


@pytest.mark.parametrize(
    "argv, code", [(["runners.train", "--choices"], 141), (["runners.run_concat_inputs_targets", "--help"], 0)]
)  # argparse's own
def test_output_into_a_closed_pipe_stops_quietly(argv, code):
    """`--choices | head`: the reader is gone; the command stops with SIGPIPE's status (141) and
    says nothing (it used to print 'cannot write or read ... a run being replaced keeps its old
    version', exit 1)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write to the pipe fails: EPIPE
    try:
        done = subprocess.run(
            [sys.executable, "-m", *argv],
            cwd=root,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(root)},
        )
    finally:
        os.close(write_end)
    assert done.returncode == code and done.stderr == "", (done.returncode, done.stderr)
