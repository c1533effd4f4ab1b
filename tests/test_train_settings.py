"""The train settings every system shares: one subtree (src.settings.TrainLoop / StepTrain) and
one check, so a shared field is accepted or refused the same way, in the same words, by every
system."""

import dataclasses

import pytest

from src.registry import registry
from src.settings import SettingsError
from src.train_settings import StepTrain, TrainLoop
import src.systems  # noqa: F401  (registers every system)

SYSTEMS = [entry.options for entry in registry("system")]
STEP_SYSTEMS = [s for s in SYSTEMS if issubclass(type(s().train), StepTrain)]


def with_train(settings_cls, **changes):
    s = settings_cls()
    return dataclasses.replace(s, train=dataclasses.replace(s.train, **changes))


def refusal(settings) -> str:
    with pytest.raises(SettingsError) as err:
        settings.validate()
    return str(err.value)


def test_every_system_trains_on_the_one_subtree():
    assert {s.system for s in SYSTEMS} == {"lsa", "gpt2", "lm", "nonlinear", "dynamics"}
    assert {s.system for s in STEP_SYSTEMS} == {"lsa", "gpt2", "lm", "nonlinear"}
    for s in SYSTEMS:
        assert isinstance(s().train, TrainLoop)
        s().validate()  # every default is accepted


@pytest.mark.parametrize(
    "field, value, accepted",
    [
        ("learning_rate", 0.0, "a finite number > 0"),
        ("learning_rate", float("nan"), "a finite number > 0"),
        ("log_every", 0, "an integer in [1, "),
        ("checkpoint_every", -1, "an integer in [0, "),
        ("seed", -1, "out of range"),
    ],
)
def test_a_loop_field_is_refused_in_the_same_words_by_every_system(field, value, accepted):
    messages = {s.system: refusal(with_train(s, **{field: value})) for s in SYSTEMS}
    assert len(set(messages.values())) == 1, messages
    message = messages["lsa"]
    assert message.startswith(f"train.{field}={value!r}") and accepted in message, message


@pytest.mark.parametrize(
    "field, value, accepted",
    [
        ("grad_clip", -1.0, "a finite number >= 0"),
        ("steps", 0, "out of range"),
        ("batch_size", 0, "out of range"),
        ("eval_size", 0, "out of range"),
        ("eval_seed", -3, "out of range"),
    ],
)
def test_a_step_field_is_refused_in_the_same_words_by_every_step_system(field, value, accepted):
    messages = {s.system: refusal(with_train(s, **{field: value})) for s in STEP_SYSTEMS}
    assert len(set(messages.values())) == 1, messages
    assert messages["gpt2"].startswith(f"train.{field}={value!r}") and accepted in messages["gpt2"]


def test_the_drift_between_systems_is_gone():
    """Before: grad_clip 0 (no clipping) was accepted by gpt2 alone, checkpoint_every 0 (only at
    the end) refused by gpt2 alone, and warmup_fraction 1 refused by lm and nonlinear alone."""
    for s in STEP_SYSTEMS:
        with_train(s, grad_clip=0.0).validate()
        with_train(s, checkpoint_every=0).validate()
        if hasattr(s().train, "warmup_fraction"):
            with_train(s, warmup_fraction=1.0).validate()
            assert "train.warmup_fraction=1.5" in refusal(with_train(s, warmup_fraction=1.5))
    with_train(SYSTEMS[[s.system for s in SYSTEMS].index("dynamics")], checkpoint_every=0).validate()


def test_grad_clip_zero_means_no_clipping():
    from src.optim import Optimizer, make_optimizer
    import jax.numpy as jnp

    grads = {"w": jnp.full(4, 100.0)}
    for clip, expected in ((0.0, 100.0), (1.0, 0.5)):
        sgd = make_optimizer(Optimizer("sgd", 1.0, grad_clip=clip), 10)
        updates, _ = sgd.update(grads, sgd.init(grads), grads)
        assert float(-updates["w"][0]) == pytest.approx(expected)


def test_optimizer_knobs_are_checked_where_a_system_has_them():
    by_name = {s.system: s for s in SYSTEMS}
    assert "train.adam_b2=1.0" in refusal(with_train(by_name["lsa"], adam_b2=1.0))
    assert "train.adam_b2=1.0" in refusal(with_train(by_name["nonlinear"], adam_b2=1.0))
    assert "train.weight_decay=-0.1" in refusal(with_train(by_name["lm"], weight_decay=-0.1))
    assert "train.weight_decay=-0.1" in refusal(with_train(by_name["gpt2"], weight_decay=-0.1))
    with_train(by_name["gpt2"], warmup_fraction=None).validate()  # a constant rate


def test_a_scale_beyond_float32_is_refused_and_float64_takes_it():
    dynamics = {s.system: s for s in SYSTEMS}["dynamics"]
    assert "the largest float32" in refusal(with_train(dynamics, init=1e300))
    assert "the largest float32" in refusal(with_train(dynamics, learning_rate=1e300))
    with_train(dynamics, init=1e300, float64=True).validate()


def test_records_read_back_with_the_same_digests():
    """The subtree moved the fields' declarations, not the records: a settings tree read back from
    its to_dict is equal and has the same digest (the digests are of sorted keys)."""
    for s in SYSTEMS:
        settings = s()
        again = s.from_dict(settings.to_dict())
        assert again == settings and again.digest() == settings.digest()
