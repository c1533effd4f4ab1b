"""Shared fixtures: small settings so the whole suite stays fast on 2 CPU cores."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from dataclasses import replace  # noqa: E402

import pytest  # noqa: E402

from src.presets import preset  # noqa: E402


def small(name="lsa1", num_layers=None, **train):
    """A preset with a short, small-batch training (test sizes, not paper sizes)."""
    defaults = dict(steps=200, batch_size=256, log_every=50, eval_size=1000)
    defaults.update(train)
    settings = preset(name, num_layers)
    return replace(settings, train=replace(settings.train, **defaults))


@pytest.fixture
def small_settings():
    return small
