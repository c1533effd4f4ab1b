"""The shared command-line pieces: typed flags name the value and what is accepted; an
unexpected exception becomes one line and a traceback file, exit 1."""
import re

import pytest

from src.cli import OneLineParser, guarded, int_at_least, number_in, seed


def test_typed_flags_one_line(capsys):
    parser = OneLineParser(prog="prog")
    parser.add_argument("--steps", type=int_at_least(1))
    parser.add_argument("--p", type=number_in(0, 1))
    parser.add_argument("--seed", type=seed())
    for argv, words in ((["--steps", "0"], "'0' is out of range; accepted: an integer >= 1"),
                        (["--steps", "x"], "'x' is not an integer"),
                        (["--p", "nan"], "accepted: a number in [0, 1]"),
                        (["--seed", str(2 ** 63)], "accepted: an integer in [0, 4294967295]")):
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
