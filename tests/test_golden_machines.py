"""How golden runs are compared across machines (tests/golden_machines.py): bit for bit where this
machine's fingerprint has a record, else to 1e-6 relative; a moved number fails either way, and
the fingerprint comes from one function a test (or ICL_GOLDEN_FINGERPRINT) overrides."""

import json

import pytest

import golden_machines as gm

RUN = {
    "metrics": [{"step": 100, "train_loss": 0.2363412, "eval_loss": 0.857871711}],
    "summary": {"eval_loss": 0.857871711, "align_cos": 0.00028165747},
    "ood_csv": "alpha,model_loss\n1,0.236341223\n2,6.3179574\n",
    "params_sha256": {"w": "ab" * 32},
}
SAMPLES = {"w": {"shape": [2, 2], "sum": 1.0, "sum_squares": 0.5, "values": [0.1, 0.2, 0.3, 0.4]}}


def moved_copy(path, value):
    """RUN with the number at `path` (keys and indices) replaced by `value`."""
    run = json.loads(json.dumps(RUN))
    node = run
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return run


def test_another_machines_rounding_passes_and_a_moved_number_fails():
    rounded = moved_copy(("summary", "eval_loss"), 0.857871771)  # the 8th digit (issue 42's machine)
    assert gm.differences(rounded, RUN, exact=False) == []
    assert gm.differences(rounded, RUN, exact=True) == ["summary"]
    moved = moved_copy(("summary", "eval_loss"), 0.85788)  # the 5th digit
    assert gm.differences(moved, RUN, exact=False) == ["summary"]
    near_zero = moved_copy(("summary", "align_cos"), 0.00028166320)  # a cosine near 0, moved by 6e-9
    assert gm.differences(near_zero, RUN, exact=False) == []
    assert gm.differences(moved_copy(("summary", "align_cos"), 0.0012), RUN, exact=False) == ["summary"]


def test_text_compares_numbers_to_the_tolerance_and_the_rest_exactly():
    assert gm.differences({**RUN, "ood_csv": RUN["ood_csv"].replace("6.3179574", "6.31795502")}, RUN, False) == []
    assert gm.differences({**RUN, "ood_csv": RUN["ood_csv"].replace("6.3179574", "6.3189574")}, RUN, False) == [
        "ood_csv"
    ]
    assert gm.differences({**RUN, "ood_csv": RUN["ood_csv"].replace("alpha", "beta")}, RUN, False) == ["ood_csv"]
    # one unit in the last digit written: 0.934786 against 0.934785 (rounded to 6 decimals)
    assert gm.differences({"e": [0.934786]}, {"e": [0.934785]}, exact=False) == []
    assert gm.differences({"e": [0.934786]}, {"e": [0.934775]}, exact=False) == ["e"]
    assert gm.differences({"accuracy": 0.12}, {"accuracy": 0.13}, exact=False) == ["accuracy"]  # no rounding


def test_parameters_compare_by_bytes_on_this_machine_and_by_shape_and_norm_elsewhere():
    assert gm.differences(moved_copy(("params_sha256", "w"), "cd" * 32), RUN, exact=True) == ["params_sha256"]
    assert gm.differences(moved_copy(("params_sha256", "w"), "cd" * 32), RUN, exact=False) == []
    wandered = {"w": {**SAMPLES["w"], "values": [0.1, 0.2, 0.31, 0.4], "sum_squares": 0.5000001}}
    assert gm.param_differences(wandered, SAMPLES) == []
    assert gm.param_differences({"w": {**SAMPLES["w"], "sum_squares": 0.51}}, SAMPLES) != []
    assert gm.param_differences({"w": {**SAMPLES["w"], "shape": [4]}}, SAMPLES) == ["w"]
    assert gm.param_differences({**SAMPLES, "b": SAMPLES["w"]}, SAMPLES)[0] == "b"


def test_the_record_of_this_fingerprint_is_exact_and_any_other_fingerprint_uses_the_tolerance(monkeypatch):
    mine = gm.measured_fingerprint()
    assert {"vendor", "family", "model", "isa", "cores", "jaxlib", "arch"} <= set(mine)
    holding = [r for r in gm.records() if "lsa1" in r.runs]
    assert len(holding) >= 3  # the legacy files at least
    other = {**mine, "family": "999", "isa": [*mine["isa"], "avx512f", "avx512_bf16"]}  # no record's
    records, exact, how = gm.comparison("lsa1", other)
    assert not exact and [r.label for r in records] == [r.label for r in holding]
    assert "compared to 1e-06 relative" in how
    monkeypatch.setenv(gm.ENV, json.dumps({"family": "999"}))
    assert gm.fingerprint()["family"] == "999" and gm.fingerprint()["vendor"] == mine["vendor"]
    assert "compared to 1e-06 relative" in gm.mode_line()
    fake = gm.Record("machine-test.json", {"lsa1": RUN}, mine)
    monkeypatch.setattr(gm, "records", lambda: [fake, *holding])
    assert gm.comparison("lsa1", mine)[:2] == ([fake], True)


@pytest.mark.parametrize("name", sorted(gm.UNSTABLE))
def test_unstable_runs_are_left_out_only_on_another_machine_and_say_why(name, monkeypatch):
    other = {**gm.measured_fingerprint(), "model": "another"}
    moved, how = gm.compare_run(name, {"anything": 1}, None, lambda n, runs: runs[n], other)
    assert moved == [] and "not compared on this machine" in how and gm.UNSTABLE[name] in how
