"""analysis.robustness's corruptions (src.gd_paper.curricula.corrupt_pairs, the one written for the training
curricula too): where the corrupted context pairs go (SPEC §7's placements) and that the query
point is never corrupted."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from src.gd_paper.curricula import corrupt_pairs


@pytest.mark.parametrize("pick, expected", [("first", [1, 1, 0, 0, 0, 0]), ("last", [0, 0, 0, 1, 1, 0])])
def test_placements_put_the_noisy_pairs_first_or_last(pick, expected):
    xs, ys = jnp.ones((3, 6, 2)), jnp.zeros((3, 6))
    _, noisy_y, mask = corrupt_pairs(jax.random.key(0), xs, ys, 2, "label_noise", 1.0, pick=pick, context=5)
    assert ((np.asarray(noisy_y) != 0).astype(int) == expected).all()
    np.testing.assert_array_equal(np.asarray(mask), np.asarray(noisy_y) != 0)


def test_mixed_placement_corrupts_exactly_count_context_pairs_and_never_the_query():
    xs, ys = jnp.ones((200, 9, 2)), jnp.zeros((200, 9))
    noisy_x, noisy_y, _ = corrupt_pairs(jax.random.key(1), xs, ys, 3, "random_pairs", 1.0, context=8)
    changed = np.asarray(noisy_y != 0) | np.asarray((noisy_x != xs).any(-1))
    assert (changed.sum(1) == 3).all() and not changed[:, -1].any()
    assert changed[:, :-1].mean(0).min() > 0.2  # every context slot gets corrupted sometimes
