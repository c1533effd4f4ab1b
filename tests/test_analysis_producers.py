"""Which command makes a missing file (src.rundir's producer hints): the recorded command gets the
flag the file needs and one --overwrite, and the analysis registry is the one list of analysis
outputs, each named by the registered module that writes it."""

import json
import sys
from pathlib import Path

import pytest

from src import rundir as names

ROOT = Path(__file__).resolve().parent.parent


def test_the_command_that_makes_a_missing_file_has_the_flag_it_needs_and_one_overwrite(tmp_path):
    """A run trained without --save_attention: the hint for its attention files adds the flag, and
    a recorded command that had --overwrite does not get a second one."""
    from src.rundir.run import RunDir

    run = tmp_path / "run"
    run.mkdir()
    for recorded in (
        "python -m runners.run_concat_inputs_targets --out RUN --steps 20",
        "python -m runners.run_concat_inputs_targets --out RUN --overwrite --steps 20",
    ):
        (run / names.CONFIG).write_text(json.dumps({"command": recorded}))
        hint = RunDir(run).producer(names.attention_file(0, 0))
        assert hint.split().count("--save_attention") == 1 and hint.split().count("--overwrite") == 1, hint
        assert RunDir(run).producer(names.PARAMS).split().count("--save_attention") == 0


def test_every_analysis_output_is_named_by_the_registered_analysis_that_writes_it():
    """The analysis registry is the one list of analysis outputs (issue 44): every file name under
    analysis/ in src/rundir/names.py maps to the registered module that writes it, and that
    module's source names the constant."""
    from src.rundir import names as run_names

    outputs = {
        key: value
        for key, value in vars(run_names).items()
        if key.isupper() and isinstance(value, str) and value.startswith(f"{run_names.ANALYSIS}/") and key != "METADATA"
    }  # analysis_metadata.json: the paper's runs write it as they train
    assert run_names.analysis_module(run_names.METADATA) is None
    assert len(outputs) >= 20
    for key, value in outputs.items():
        module = run_names.analysis_module(value)
        assert module is not None, f"{key} = {value!r}: no registered analysis lists it in its files"
        source = (ROOT / (module.replace(".", "/") + ".py")).read_text()
        assert key in source or value in source, f"{module} does not write {key}"


def test_a_newly_registered_analysis_is_its_own_files_producer(tmp_path):
    """Registering an analysis is all it takes for a missing output to name its command."""
    from analysis.common import on_request, register_analysis
    from src.registry import registry
    from src.rundir import RunDir

    def toy(run_dir):
        return None

    register_analysis("toy_for_a_test", toy, "a test's analysis", on_request, files=["analysis/toy_*.json"])
    try:
        assert RunDir(tmp_path).producer("analysis/toy_one.json") == f"python -m {__name__} --run {tmp_path}"
        assert registry("analysis").get("toy_for_a_test").build(None).outputs(None) == []
    finally:
        registry("analysis")._entries.pop("toy_for_a_test")


def test_an_analysis_run_as_main_is_still_named_by_its_module(monkeypatch):
    """python -m analysis.<name> executes the module as __main__ and registers it again: the
    producer of its files stays `analysis.<name>`, not `__main__`."""
    import runpy
    from src.rundir import names as run_names

    assert run_names.analysis_module(run_names.ICL_CURVE_CSV) == "analysis.icl_curve"  # entries loaded first
    monkeypatch.setattr(sys, "argv", ["analysis.icl_curve", "--help"])
    with pytest.raises(SystemExit):
        runpy.run_module("analysis.icl_curve", run_name="__main__")
    assert run_names.analysis_module(run_names.ICL_CURVE_CSV) == "analysis.icl_curve"
