"""Noise, ordering and placement follow SPEC §7 exactly."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from src.gd_paper.config import ORDERINGS, PLACEMENTS, CurriculumConfig, TaskConfig

from src.gd_paper.presets import preset
from src.gd_paper.curricula import apply_curriculum, num_corrupted, ordering_key, permute_pairs
from src.tasks.regression import sample_tasks
from src.gd_paper.models.attention_only import build_model

TASK = TaskConfig()


def _tasks(batch=64, seed=0):
    return sample_tasks(jax.random.key(seed), batch, TASK)


@pytest.mark.parametrize("mode", ["label_noise", "random_pairs"])
@pytest.mark.parametrize("p", [0.0, 0.1, 0.25, 0.5, 1.0])
def test_exact_number_corrupted(mode, p):
    out = apply_curriculum(jax.random.key(1), _tasks(), CurriculumConfig(noise_mode=mode, noise_p=p), TASK)
    expected = num_corrupted(p, TASK.num_context)
    assert expected == int(np.floor(p * 10 + 0.5))
    assert np.all(np.asarray(out.noise_mask).sum(axis=1) == expected)


def test_corruption_touches_only_masked_pairs():
    clean = _tasks()
    c = CurriculumConfig(noise_mode="random_pairs", noise_p=0.3, noise_sigma=2.0)
    out = apply_curriculum(jax.random.key(2), clean, c, TASK)
    # undo the permutation to compare with the clean pairs
    inverse = np.argsort(np.asarray(out.ordering_idx), axis=1)
    x_back = np.take_along_axis(np.asarray(out.tasks.context_x), inverse[..., None], axis=1)
    mask_back = np.take_along_axis(np.asarray(out.noise_mask), inverse, axis=1)
    changed = np.any(x_back != np.asarray(clean.context_x), axis=-1)
    assert np.array_equal(changed, mask_back)
    np.testing.assert_array_equal(out.tasks.query_x, clean.query_x)
    np.testing.assert_array_equal(out.tasks.query_y, clean.query_y)


def test_label_noise_with_zero_sigma_is_identity_on_labels():
    clean = _tasks()
    c = CurriculumConfig(noise_mode="label_noise", noise_p=0.5, noise_sigma=0.0)
    out = apply_curriculum(jax.random.key(3), clean, c, TASK)
    back = permute_pairs(clean, out.ordering_idx)
    np.testing.assert_array_equal(out.tasks.context_y, back.context_y)
    np.testing.assert_array_equal(out.tasks.context_x, back.context_x)


def test_label_noise_changes_labels_with_stated_scale():
    clean = _tasks(batch=2000)
    c = CurriculumConfig(noise_mode="label_noise", noise_p=0.5, noise_sigma=0.5, ordering="smallnorm2largenorm")
    out = apply_curriculum(jax.random.key(4), clean, c, TASK)
    back = permute_pairs(clean, out.ordering_idx)
    delta = np.asarray(out.tasks.context_y - back.context_y)
    mask = np.asarray(out.noise_mask)
    assert np.all(delta[~mask] == 0)
    assert abs(delta[mask].std() - 0.5) < 0.02


@pytest.mark.parametrize("ordering", ORDERINGS[1:])
def test_orderings_sort_by_their_key(ordering):
    out = apply_curriculum(jax.random.key(5), _tasks(), CurriculumConfig(ordering=ordering), TASK)
    t = out.tasks
    norms = np.linalg.norm(np.asarray(t.context_x), axis=-1)
    cos = np.abs(np.einsum("bnd,bd->bn", t.context_x, t.query_x)) / (
        norms * np.linalg.norm(np.asarray(t.query_x), axis=-1)[:, None]
    )
    key = {"smallnorm2largenorm": norms, "easy2hard": 1 - cos, "hard2easy": cos}[ordering]
    assert np.all(np.diff(key, axis=1) >= -1e-6)


def test_random_ordering_is_a_permutation_and_varies():
    out = apply_curriculum(jax.random.key(6), _tasks(), CurriculumConfig(), TASK)
    perm = np.asarray(out.ordering_idx)
    assert np.all(np.sort(perm, axis=1) == np.arange(10))
    assert len({tuple(p) for p in perm}) > 50


@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("ordering", ORDERINGS)
def test_placement_groups_and_orders_within_groups(placement, ordering):
    c = CurriculumConfig(ordering=ordering, noise_mode="label_noise", noise_p=0.3, noise_placement=placement)
    out = apply_curriculum(jax.random.key(7), _tasks(), c, TASK)
    mask = np.asarray(out.noise_mask)
    k = num_corrupted(0.3, 10)
    if placement == "clean_first":
        assert np.all(mask[:, 10 - k :]) and not np.any(mask[:, : 10 - k])
    elif placement == "noisy_first":
        assert np.all(mask[:, :k]) and not np.any(mask[:, k:])
    else:
        assert len({tuple(m) for m in mask}) > 10  # corrupted pairs anywhere
    if ordering != "random":
        key = np.asarray(ordering_key(None, out.tasks, ordering))
        for group in (mask, ~mask):  # sorted within each group
            for row_key, row_group in zip(key, group):
                assert np.all(np.diff(row_key[row_group]) >= -1e-6)


def test_saved_permutation_and_mask_reproduce_eval_batch():
    """What the runner saves (ordering_idx, noise_mask) rebuilds the eval batch from the clean one."""
    from dataclasses import replace
    from src.gd_paper.eval_set import make_eval_set

    s = preset("lsa1")
    c = CurriculumConfig(
        ordering="easy2hard", noise_mode="label_noise", noise_p=0.2, noise_sigma=0.0, noise_placement="noisy_first"
    )
    s = replace(s, train=replace(s.train, eval_size=500), eval_curriculum=c)
    ev = make_eval_set(s, gd_eta=1.0)
    rebuilt = permute_pairs(ev.clean_tasks, jnp.asarray(ev.ordering_idx))
    np.testing.assert_array_equal(rebuilt.context_x, ev.tasks.context_x)
    np.testing.assert_array_equal(rebuilt.context_y, ev.tasks.context_y)  # sigma 0: labels unchanged
    assert ev.noise_mask.sum(axis=1).tolist() == [2] * 500
    assert np.all(ev.noise_mask[:, :2])


def test_lsa1_is_invariant_to_every_ordering_and_copy_model_is_not():
    s_lsa, s_two = preset("lsa1"), preset("twolayer")
    tasks = _tasks(batch=256, seed=9)
    lsa, two = build_model(s_lsa.task, s_lsa.model), build_model(s_two.task, s_two.model)
    p_lsa = jax.tree_util.tree_map(lambda w: w * 30, lsa.init(jax.random.key(0)))  # non-trivial weights
    p_two = jax.tree_util.tree_map(lambda w: w * 30, two.init(jax.random.key(0)))
    base_lsa, base_two = lsa.predict(p_lsa, tasks), two.predict(p_two, tasks)
    assert float(jnp.max(jnp.abs(base_lsa))) > 1e-2
    for ordering in ORDERINGS:
        reordered = apply_curriculum(jax.random.key(10), tasks, CurriculumConfig(ordering=ordering), TASK).tasks
        assert float(jnp.max(jnp.abs(lsa.predict(p_lsa, reordered) - base_lsa))) <= 1e-5
        assert float(jnp.max(jnp.abs(two.predict(p_two, reordered) - base_two))) > 1e-3


def test_curriculum_boundaries_are_the_steps_where_it_grows():
    """The loss figure's marks: dims 5 -> 20 by 1 every 2,000 steps grows at 2,000 ... 30,000;
    points 11 -> 41 by 2 at 2,000 ... 30,000; a fixed schedule never; only steps inside the run."""
    from src.tasks.garg import Schedule

    assert Schedule(5, 20, 1, 2000).changes(100_000) == list(range(2000, 30_001, 2000))
    assert Schedule(11, 41, 2, 2000).changes(5000) == [2000, 4000]
    assert Schedule(11, 12, 2, 2000).changes(10_000) == [2000]  # one step reaches end
    assert Schedule(5, 5, 1, 2000).changes(10_000) == []
    for t in Schedule(11, 41, 2, 2000).changes(100_000):  # the value moves there
        assert int(Schedule(11, 41, 2, 2000).at(t)) > int(Schedule(11, 41, 2, 2000).at(t - 1))


def test_corrupt_pairs_is_the_one_corruption_of_both_forms_and_keeps_inactive_coordinates():
    """von Oswald et al.'s form (context and query) and the prompts of pairs (the GPT-2 family's) are corrupted
    by the same function: the curriculum's labels on the paper's form are corrupt_pairs' on its
    context; random pairs' Gaussian inputs stay 0 where a curriculum has not yet opened a coordinate."""
    from src.gd_paper.curricula import corrupt, corrupt_pairs, gaussian_inputs

    tasks = _tasks()
    c = CurriculumConfig(noise_mode="label_noise", noise_p=0.3, noise_sigma=0.5)
    noisy, mask = corrupt(jax.random.key(4), tasks, c, TASK)
    _, context_y, same_mask = corrupt_pairs(jax.random.key(4), tasks.context_x, tasks.context_y, 3, "label_noise", 0.5)
    np.testing.assert_array_equal(np.asarray(noisy.context_y), np.asarray(context_y))
    np.testing.assert_array_equal(np.asarray(mask), np.asarray(same_mask))
    xs = jnp.ones((4, 7, 5)).at[..., 3:].set(0.0)
    fresh = np.asarray(gaussian_inputs(jax.random.key(0), xs))
    assert not fresh[..., 3:].any() and np.all(fresh[..., :3] != 0)
    with pytest.raises(ValueError, match="pick='middle'"):
        corrupt_pairs(jax.random.key(0), xs, jnp.zeros((4, 7)), 2, "label_noise", 1.0, pick="middle")
