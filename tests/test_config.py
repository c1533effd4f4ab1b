"""Bad settings are refused with a message naming the setting and what is accepted."""
from dataclasses import replace

import pytest

from src.config import Settings, preset, validate


@pytest.mark.parametrize("field, value, words", [
    ("d", 0, "d=0"), ("d", -3, "d=-3"), ("num_context", 0, "num_context"),
])
def test_bad_task(field, value, words):
    s = preset("lsa1")
    with pytest.raises(ValueError, match=words) as info:
        validate(replace(s, task=replace(s.task, **{field: value})))
    assert ">= 1" in str(info.value)


@pytest.mark.parametrize("field, value, words", [
    ("batch_size", 0, "batch_size=0"), ("lr", float("nan"), "lr=nan"), ("lr", float("inf"), "lr=inf"),
    ("steps", 0, "steps=0"),
])
def test_bad_training(field, value, words):
    s = preset("lsa1")
    with pytest.raises(ValueError, match=words) as info:
        validate(replace(s, train=replace(s.train, **{field: value})))
    assert ">" in str(info.value)


def test_unknown_model_lists_accepted():
    with pytest.raises(ValueError, match="model='gpt'.*lsa1.*twolayer"):
        preset("gpt")


def test_bad_curriculum():
    s = preset("lsa1")
    with pytest.raises(ValueError, match=r"train_noise_p=1.5.*\[0, 1\]"):
        validate(replace(s, train_curriculum=replace(s.train_curriculum, noise_p=1.5)))
    with pytest.raises(ValueError, match="eval_ordering='sideways'.*easy2hard"):
        validate(replace(s, eval_curriculum=replace(s.eval_curriculum, ordering="sideways")))


def test_presets_follow_spec():
    lsa = preset("lsa1")
    assert (lsa.train.steps, lsa.train.batch_size, lsa.train.lr) == (5000, 2048, 1e-3)
    assert lsa.model.init_scale == 0.002 and lsa.model.clip_value == 0
    two = preset("twolayer")
    assert (two.train.steps, two.model.softmax_layers, two.model.key_size) == (10_000, (0,), 20)
    assert abs(two.model.init_scale - 0.01) < 1e-12
    deep = preset("lsa_rec", num_layers=4)
    assert deep.train.lr == 5e-4 and deep.model.clip_value == 10.0
    assert Settings.from_dict(deep.to_dict()) == deep
