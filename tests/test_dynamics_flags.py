"""The training-dynamics paper's --vary_len and --track_value (src/systems/dynamics.py): the loss
over every prefix, each prediction divided by its length, against the model's direct forward
pass prefix by prefix in NumPy; the value's y -> y weight of each head per epoch against the
parameters; settings without them written as before."""

import numpy as np

from src.loop import train as loop_train
from src.models.dynamics import INIT_CONVENTIONS  # noqa: F401 - the registry's models
from src.registry import choice, registry
from src.systems.dynamics import DynamicsSettings, DynamicsTrain, DynamicsTrainer
from src.tasks.dynamics import DynamicsTaskConfig, make_sets

TASK = DynamicsTaskConfig(in_dim=3, seq_len=6, trainset_size=40, testset_size=20, seed=2)


def settings(model="attn_separate", epochs=3, **train):
    options = {"heads": 2, **({"rank": 2} if model == "attn_separate" else {})}
    return DynamicsSettings(
        task=TASK,
        model=choice("dynamics_model", model, **options),
        train=DynamicsTrain(epochs=epochs, learning_rate=0.05, init=0.3, log_every=1, float64=True, **train),
    ).validate()


def trained(s):
    """(trainer, result, dynamics.npz's arrays, the initial parameters as NumPy float64)."""
    trainer = DynamicsTrainer(s)
    with trainer.context():
        init = {k: np.asarray(v) for k, v in trainer.init_state().params.items()}
        result = loop_train(trainer)
        return trainer, result, trainer.trajectory(result), init


def test_vary_len_is_the_mean_loss_over_prefixes_each_prediction_divided_by_its_length():
    s = settings(vary_len=True)
    trainer, result, out, params = trained(s)
    model = registry("dynamics_model").get(s.model.name).build(s.model.options)
    sets = make_sets(s.task)
    tokens, targets = sets["train"].tokens, sets["train"].targets
    losses = []
    for n in range(2, tokens.shape[1] + 1):
        prefix = tokens[:, :n].copy()
        y = prefix[:, -1, -1].copy() if n < tokens.shape[1] else targets
        prefix[:, -1, -1] = 0.0
        losses.append(np.mean((np.asarray(model.predict(params, prefix, False)) / n - y) ** 2))
    assert abs(out["loss"][0] - np.mean(losses)) <= 1e-9 * max(1.0, np.mean(losses))
    test = sets["test_icl"]
    direct = np.mean((np.asarray(model.predict(params, test.tokens, False)) / test.tokens.shape[1] - test.targets) ** 2)
    assert abs(out["test_icl_loss"][0] - direct) <= 1e-9 * max(1.0, direct)
    assert out["loss"][-1] < out["loss"][0]
    assert s.to_dict()["train"]["vary_len"] is True and "track_value" not in s.to_dict()["train"]


def test_track_value_records_each_heads_value_y_weight_before_each_epoch():
    for model in ("attn_separate", "attn_merged"):
        s = settings(model, epochs=4, track_value=True)
        trainer, result, out, init = trained(s)
        assert out["value_yy"].shape == (4, 2)
        assert np.array_equal(out["value_yy"][0], init["value"][:, -1])
        assert not np.array_equal(out["value_yy"][0], out["value_yy"][-1])
        summary = trainer.summary(result)
        assert summary["final_value_yy"] == out["value_yy"][-1].tolist()


def test_without_the_flags_the_record_is_as_before():
    raw = settings().to_dict()["train"]
    assert "vary_len" not in raw and "track_value" not in raw
