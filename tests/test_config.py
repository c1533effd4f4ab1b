"""Bad settings are refused with a message naming the setting and what is accepted."""
from dataclasses import replace

import pytest

from src.config import Settings, validate

from src.presets import preset


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
    assert (two.train.steps, two.model.mixers, two.model.key_size) == (10_000, ("softmax", "linear"), 20)
    assert two.model.layout.name == "interleaved" and two.model.layout.options.pe_size == 10
    assert abs(two.model.init_scale - 0.01) < 1e-12
    deep = preset("lsa_rec", num_layers=4)
    assert deep.train.lr == 5e-4 and deep.model.clip_value == 10.0
    assert Settings.from_dict(deep.to_dict()) == deep


# Schema 1 (config.json of runs made before the registries) still loads and means the same model.
V1_MODEL = {"name": "twolayer", "tokens": "interleaved", "num_layers": 2, "recurrent": False,
            "num_heads": 1, "key_size": 20, "softmax_layers": [0], "init_scale": 0.01,
            "clip_value": 0.0, "pe_size": 10}
V1_REST = {"task": {"d": 10, "num_context": 10, "input_range": 1.0, "weight_scale": 1.0},
           "train": dict(steps=10000, batch_size=2048, lr=0.001, adam_b1=0.9, adam_b2=0.98,
                         grad_clip_norm=10.0, log_every=100, eval_size=10000, seed=0,
                         eval_seed=20230),
           "train_curriculum": dict(ordering="random", noise_mode="clean", noise_p=0.0,
                                    noise_sigma=1.0, noise_placement="mixed")}
V1_REST["eval_curriculum"] = dict(V1_REST["train_curriculum"])


def test_v1_settings_load_as_the_same_models():
    assert Settings.from_dict({**V1_REST, "model": V1_MODEL}) == preset("twolayer")
    rec = dict(V1_MODEL, name="lsa_rec", tokens="concat", num_layers=4, recurrent=True,
               key_size=0, softmax_layers=[], init_scale=0.0005, clip_value=10.0)
    v1 = {**V1_REST, "model": rec, "train": dict(V1_REST["train"], steps=5000, lr=5e-4)}
    assert Settings.from_dict(v1) == preset("lsa_rec", num_layers=4)


def test_unknown_schema_and_registry_names_are_refused():
    raw = preset("lsa1").to_dict()
    with pytest.raises(ValueError, match="schema_version=9"):
        Settings.from_dict({**raw, "schema_version": 9})
    s = preset("lsa1")
    with pytest.raises(ValueError, match="mixers='relu'.*linear.*softmax"):
        validate(replace(s, model=replace(s.model, mixers=("relu",))))
    with pytest.raises(ValueError, match="mixers=.*one scoring per layer"):
        validate(replace(s, model=replace(s.model, mixers=("linear", "linear"))))
