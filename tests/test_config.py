"""The paper's system's settings (LSASettings): bad values are refused with one line naming the
setting and what is accepted; the presets follow SPEC §4; every schema it has written loads."""

from dataclasses import replace

import pytest

from src.gd_paper.presets import preset
from src.settings import SCHEMA_VERSION, SettingsError
from src.systems.lsa import LSASettings


@pytest.mark.parametrize(
    "field, value, words",
    [
        ("d", 0, "task.d=0"),
        ("d", -3, "task.d=-3"),
        ("num_context", 0, "task.num_context=0"),
    ],
)
def test_bad_task(field, value, words):
    s = preset("lsa1")
    with pytest.raises(SettingsError, match=words) as info:
        replace(s, task=replace(s.task, **{field: value})).validate()
    assert ">= 1" in str(info.value)


@pytest.mark.parametrize(
    "field, value, words",
    [
        ("batch_size", 0, "train.batch_size=0"),
        ("learning_rate", float("nan"), "learning_rate=nan"),
        ("learning_rate", float("inf"), "learning_rate=inf"),
        ("steps", 0, "train.steps=0"),
    ],
)
def test_bad_training(field, value, words):
    s = preset("lsa1")
    with pytest.raises(SettingsError, match=words) as info:
        replace(s, train=replace(s.train, **{field: value})).validate()
    assert "accepted" in str(info.value)


def test_a_value_of_the_wrong_type_is_named():
    s = preset("lsa1")
    with pytest.raises(SettingsError, match="train.eval_size='5'.*an integer"):
        replace(s, train=replace(s.train, eval_size="5")).validate()
    with pytest.raises(SettingsError, match="task.d=.*an integer"):
        LSASettings.from_dict({**s.to_dict(), "task": {**s.to_dict()["task"], "d": "ten"}})


def test_unknown_model_lists_accepted():
    with pytest.raises(ValueError, match="model='gpt'.*lsa1.*twolayer"):
        preset("gpt")


def test_bad_curriculum():
    s = preset("lsa1")
    with pytest.raises(SettingsError, match=r"train_curriculum.noise_p=1.5.*\[0, 1\]"):
        replace(s, train_curriculum=replace(s.train_curriculum, noise_p=1.5)).validate()
    with pytest.raises(SettingsError, match="eval_curriculum.ordering='sideways'.*easy2hard"):
        replace(s, eval_curriculum=replace(s.eval_curriculum, ordering="sideways")).validate()


def test_presets_follow_spec():
    lsa = preset("lsa1")
    assert (lsa.train.steps, lsa.train.batch_size, lsa.train.learning_rate) == (5000, 2048, 1e-3)
    assert lsa.model.init_scale == 0.002 and lsa.model.clip_value == 0
    two = preset("twolayer")
    assert (two.train.steps, two.model.mixers, two.model.key_size) == (10_000, ("softmax", "linear"), 20)
    assert two.model.layout.name == "interleaved" and two.model.layout.options.pe_size == 10
    assert abs(two.model.init_scale - 0.01) < 1e-12
    deep = preset("lsa_rec", num_layers=4)
    assert deep.train.learning_rate == 5e-4 and deep.model.clip_value == 10.0
    assert LSASettings.from_dict(deep.to_dict()) == deep


# Schema 1 (config.json of runs made before the registries) still loads and means the same model.
V1_MODEL = {
    "name": "twolayer",
    "tokens": "interleaved",
    "num_layers": 2,
    "recurrent": False,
    "num_heads": 1,
    "key_size": 20,
    "softmax_layers": [0],
    "init_scale": 0.01,
    "clip_value": 0.0,
    "pe_size": 10,
}
V1_REST = {
    "task": {"d": 10, "num_context": 10, "input_range": 1.0, "weight_scale": 1.0},
    "train": dict(
        steps=10000,
        batch_size=2048,
        lr=0.001,
        adam_b1=0.9,
        adam_b2=0.98,
        grad_clip_norm=10.0,
        log_every=100,
        eval_size=10000,
        seed=0,
        eval_seed=20230,
    ),
    "train_curriculum": dict(
        ordering="random", noise_mode="clean", noise_p=0.0, noise_sigma=1.0, noise_placement="mixed"
    ),
}
V1_REST["eval_curriculum"] = dict(V1_REST["train_curriculum"])


def test_v1_and_v2_settings_load_as_the_same_models():
    assert LSASettings.from_dict({**V1_REST, "model": V1_MODEL}) == preset("twolayer")
    rec = dict(
        V1_MODEL,
        name="lsa_rec",
        tokens="concat",
        num_layers=4,
        recurrent=True,
        key_size=0,
        softmax_layers=[],
        init_scale=0.0005,
        clip_value=10.0,
    )
    v1 = {**V1_REST, "model": rec, "train": dict(V1_REST["train"], steps=5000, lr=5e-4)}
    assert LSASettings.from_dict(v1) == preset("lsa_rec", num_layers=4)
    v2 = preset("lsa1").to_dict()  # schema 2: lr and grad_clip_norm, no system
    v2["train"] = {
        ("lr" if k == "learning_rate" else "grad_clip_norm" if k == "grad_clip" else k): v
        for k, v in v2["train"].items()
        if k != "checkpoint_every"
    }
    v2.pop("system"), v2.pop("save_attention")
    assert LSASettings.from_dict({**v2, "schema_version": 2}) == preset("lsa1")


def test_unknown_schema_keys_and_registry_names_are_refused():
    raw = preset("lsa1").to_dict()
    with pytest.raises(SettingsError, match=f"schema_version=9.*1..{SCHEMA_VERSION}"):
        LSASettings.from_dict({**raw, "schema_version": 9})
    with pytest.raises(SettingsError, match="train.nope: unknown key"):
        LSASettings.from_dict({**raw, "train": {**raw["train"], "nope": 1}})
    s = preset("lsa1")
    with pytest.raises(SettingsError, match="model.mixers='relu'.*linear.*softmax"):
        replace(s, model=replace(s.model, mixers=("relu",))).validate()
    with pytest.raises(SettingsError, match="model.mixers=.*one scoring per layer"):
        replace(s, model=replace(s.model, mixers=("linear", "linear"))).validate()
