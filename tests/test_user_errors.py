"""Errors in a user's own code are named (issue 63): a sequence mixer that raises, or returns
another shape, is refused while the model is built, in one line naming the mixer and its file
(exit 2); a crash inside a registered entry names the entry, and says "please report it" only
where the failing code is the checkout's own; WORKBENCH_DEBUG=1 prints the traceback."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import haiku as hk
import pytest

from src.models.mixers.kit import MIXERS, MixerError, register_mixer
from src.process import failing_entry, guarded
from src.registry import NoOptions, choice

ROOT = Path(__file__).resolve().parent.parent
HERE = str(Path(__file__).relative_to(ROOT))


class Raises(hk.Module):
    def __call__(self, x):
        raise TypeError("a mistake in my mixer")


class Narrows(hk.Module):
    def __call__(self, x):
        return x[..., :-1]


@pytest.fixture
def user_mixers():
    """Two scratch mixers registered for one test, then removed (other tests list every mixer)."""
    register_mixer("scratch_raises", NoOptions, "raises", lambda o, h, n, p: Raises(name=n), state=lambda o, d, h, t: 0)
    register_mixer(
        "scratch_narrows", NoOptions, "wrong shape", lambda o, h, n, p: Narrows(name=n), state=lambda o, d, h, t: 0
    )
    yield
    for name in ("scratch_raises", "scratch_narrows"):
        MIXERS._entries.pop(name, None)


def build_with(mixer: str):
    from src.systems import build
    from src.systems.gpt2 import GPT2Settings

    settings = GPT2Settings().validate()
    model = dataclasses.replace(settings.model, seq_mixer=choice("seq_mixer", mixer))
    return build(dataclasses.replace(settings, model=model).validate())


def test_a_mixer_that_raises_is_named_with_its_file_before_training(user_mixers):
    with pytest.raises(MixerError) as caught:
        build_with("scratch_raises")
    text = str(caught.value)
    assert "seq_mixer 'scratch_raises'" in text and f"{HERE}:" in text and "raised TypeError: a mistake" in text
    assert len(text.splitlines()) == 1


def test_a_mixer_of_the_wrong_shape_is_refused_at_build(user_mixers):
    with pytest.raises(
        MixerError,
        match=r"seq_mixer 'scratch_narrows' \(tests/test_user_errors.py:\d+\) returned "
        r"shape \(\d+, \d+, 63\) for input \(\d+, \d+, 64\)",
    ):
        build_with("scratch_narrows")


def test_guarded_exits_2_in_one_line_and_prints_the_traceback_on_request(user_mixers, capsys, monkeypatch):
    assert guarded(lambda: build_with("scratch_raises") and 0) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "scratch_raises" in err[0] and HERE in err[0]
    monkeypatch.setenv("WORKBENCH_DEBUG", "1")
    assert guarded(lambda: build_with("scratch_raises") and 0) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "a mistake in my mixer" in err and err.strip().splitlines()[-1].count("error:") == 1


def test_a_crash_in_a_registered_entry_names_it_and_reports_only_our_own_code(tmp_path, monkeypatch, capsys):
    from src import provenance
    from src.registry import registry

    user_file = tmp_path / "my_task.py"  # a user's module, outside git: theirs to fix
    user_file.write_text("def build(options):\n    raise RuntimeError('broken task')\n")
    namespace: dict = {}
    exec(compile(user_file.read_text(), str(user_file), "exec"), namespace)
    registry("task").register("scratch_task", NoOptions, doc="a broken task")(namespace["build"])
    try:
        monkeypatch.setattr(provenance, "ROOT", tmp_path)
        assert guarded(lambda: registry("task").get("scratch_task").build(None)) == 1
        err = capsys.readouterr().err.strip()
        assert "RuntimeError in task 'scratch_task' (my_task.py:2): broken task" in err
        assert "please report it" not in err and "unexpected" not in err
        monkeypatch.setattr(provenance, "ROOT", ROOT)
        try:
            raise ValueError("ours")
        except ValueError as exc:
            assert failing_entry(exc.__traceback__) == ("", True)  # no entry's frame: ours, as before
    finally:
        registry("task")._entries.pop("scratch_task", None)
    assert sys.modules  # the process lives on
