"""Shared fixtures: small settings so the whole suite stays fast on 2 CPU cores.

The session shares one persistent XLA compilation cache, in a temporary folder it creates and
removes, with every process the tests start (unless JAX_COMPILATION_CACHE_DIR names one: then
that one, kept; .ci/run shares one across its three tiers): many tests run the same small
programs in fresh processes. A program loaded from the cache gives
the same results bit for bit as one compiled afresh (tests/test_garg.py checks this across
processes)."""

import os
import shutil
import sys
import tempfile

if "JAX_COMPILATION_CACHE_DIR" not in os.environ:  # before anything imports jax
    _SESSION_CACHE = tempfile.mkdtemp(prefix="icl-tests-jax-cache-")
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _SESSION_CACHE
else:  # a cache the caller keeps (.ci/run: one for its three tiers, which compile many of the same programs)
    _SESSION_CACHE = None
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")  # every program: a run compiles
# some 150 small eager ops (about 7 s), which a later process reads back in a fraction of that
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "study: runs a study's --quick form end to end (make test_studies; CI runs it after make test)"
    )
    config.addinivalue_line(
        "markers",
        "slow: an end-to-end check listed in tests/slow_tests.py (make test_slow; CI runs it after make test)",
    )


def pytest_collection_modifyitems(session, config, items):
    """Mark the slow tier (tests/slow_tests.py); a listed test of a collected file that no longer
    exists stops the session, so the list follows renames."""
    from slow_tests import ONE_OF, SLOW_FILES, SLOW_TESTS

    collected = {item.nodeid for item in items}
    files = {nodeid.split("::")[0] for nodeid in collected}
    for item in items:
        if item.nodeid in SLOW_TESTS or item.nodeid.split("::")[0] in SLOW_FILES:
            item.add_marker(pytest.mark.slow)
    whole_files = not any("::" in arg for arg in config.args) and not config.getoption("keyword")
    either = set().union(*ONE_OF)
    missing = [
        nodeid
        for nodeid in SLOW_TESTS
        if nodeid.split("::")[0] in files and nodeid not in collected and nodeid not in either
    ]
    missing += [
        " or ".join(sorted(group))
        for group in ONE_OF
        if next(iter(group)).split("::")[0] in files and not group & collected
    ]
    if whole_files and missing:
        raise pytest.UsageError(f"tests/slow_tests.py names tests that do not exist: {missing}")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """How the golden runs were compared on this machine: bit for bit, or to the stated tolerance."""
    if any("golden" in str(arg) or arg.rstrip("/").endswith("tests") for arg in config.args):
        from golden_machines import mode_line

        terminalreporter.write_line(mode_line())


def pytest_sessionfinish(session, exitstatus):
    if _SESSION_CACHE:
        shutil.rmtree(_SESSION_CACHE, ignore_errors=True)


sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from dataclasses import replace  # noqa: E402

import pytest  # noqa: E402

from src.gd_paper.presets import preset  # noqa: E402


def small(name="lsa1", num_layers=None, **train):
    """A preset with a short, small-batch training (test sizes, not paper sizes)."""
    defaults = dict(steps=200, batch_size=256, log_every=50, eval_size=1000)  # train.<field>
    defaults.update(train)
    settings = preset(name, num_layers)
    return replace(settings, train=replace(settings.train, **defaults))


def tiny_gpt2(dims: int, points: int, layers: int):
    """The gpt2 system's settings at a fixed shape (d dims, n points, no curriculum) and a test's
    size: width 16, 2 heads, `layers` layers, a position table of 2n tokens, 20 steps."""
    from src.registry import registry

    settings = registry("system").get("gpt2").options()
    c = settings.curriculum
    return replace(
        settings,
        model=replace(settings.model, n_dims=dims, width=16, n_layer=layers, n_head=2, max_tokens=2 * points),
        curriculum=replace(
            c,
            dims=replace(c.dims, start=dims, end=dims, inc=0),
            points=replace(c.points, start=points, end=points, inc=0),
        ),
        train=replace(settings.train, steps=20, log_every=10, eval_size=32),
    ).validate()


@pytest.fixture
def small_settings():
    return small
