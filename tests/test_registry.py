"""The registry mechanism: lookup, unknown names in one line, options from JSON, applies."""

from dataclasses import dataclass

import pytest

from src.registry import Choice, Registry, UnknownChoice, describe_all, registry


@dataclass(frozen=True)
class Width:
    width: int = 4


def test_register_get_build_and_unknown_name():
    reg = Registry("toy")
    reg.register("double", Width, doc="doubles")(lambda options, x: x * 2 * options.width)
    reg.register("only_big", Width, applies=lambda s: s > 10)(lambda options, x: x)
    entry = reg.get("double")
    assert entry.build(Width(3), x=1) == 6 and entry.doc == "doubles"
    with pytest.raises(UnknownChoice) as err:
        reg.get("triple")
    assert str(err.value) == "toy 'triple' is unknown; accepted: double, only_big"
    with pytest.raises(UnknownChoice) as err:  # a misspelling gets the nearest name
        reg.get("dubble")
    assert str(err.value) == "toy 'dubble' is unknown; accepted: double, only_big; did you mean 'double'?"
    assert [e.name for e in reg.applicable(5)] == ["double"]
    assert entry.options_from_dict({"width": 7}) == Width(7)
    with pytest.raises(UnknownChoice, match="no option 'depth'"):
        entry.options_from_dict({"depth": 1})


def test_options_must_be_frozen_dataclasses():
    @dataclass
    class Mutable:
        x: int = 1

    with pytest.raises(TypeError):
        Registry("toy").register("bad", Mutable)


def test_unknown_kind_and_describe():
    with pytest.raises(UnknownChoice, match="registry kind"):
        registry("nonsense")
    assert isinstance(describe_all(), str)


def test_choice_round_trip_through_json_form():
    reg = registry("norm")
    reg.register("toy_identity_norm", Width)(lambda options: None)
    try:
        c = Choice("toy_identity_norm", Width(5))
        assert Choice.from_dict("norm", c.to_dict()) == c
        assert Choice.from_dict("norm", "toy_identity_norm") == Choice("toy_identity_norm", Width())
    finally:
        del reg._entries["toy_identity_norm"]  # keep the global registry as the code made it
