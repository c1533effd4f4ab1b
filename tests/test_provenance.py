"""Which code made a run: the training-code fingerprint (stable, changed by any edit), the git record
(untracked code makes it dirty, named), and the one-line truth when a run names code not here."""

import shutil

from src import provenance


def test_fingerprint_is_stable_and_tracks_edits(tmp_path, monkeypatch):
    for folder in provenance.TRAINING_SOURCES:
        shutil.copytree(provenance.ROOT / folder, tmp_path / folder)
    monkeypatch.setattr(provenance, "ROOT", tmp_path)
    first = provenance.code_fingerprint()
    assert first == provenance.code_fingerprint() and len(first) == 16
    path = tmp_path / "src" / "tasks" / "regression.py"  # sub-packages count too
    path.write_text(path.read_text() + "\n# an edit\n")
    assert provenance.code_fingerprint() != first


def _git(cwd, *args):
    import subprocess

    subprocess.run(
        ["git", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        env={
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
            "PATH": "/usr/bin:/bin",
        },
    )


def test_untracked_code_makes_a_run_dirty_and_is_named(tmp_path, monkeypatch):
    """A new mixer file not yet committed: config.json's git record says dirty and names it; an
    ignored file (a cache) or one outside the code folders does not count."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "model.py").write_text("x = 1\n")
    (tmp_path / ".gitignore").write_text("__pycache__/\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "first")
    monkeypatch.setattr(provenance, "ROOT", tmp_path)
    clean = provenance.git_commit()
    assert clean["dirty"] is False and len(clean["commit"]) == 40 and "untracked" not in clean
    (tmp_path / "src" / "__pycache__").mkdir()
    (tmp_path / "src" / "__pycache__" / "model.pyc").write_bytes(b"\0")
    (tmp_path / "notes.txt").write_text("not code\n")
    assert provenance.git_commit()["dirty"] is False
    (tmp_path / "src" / "my_mixer.py").write_text("y = 2\n")
    dirty = provenance.git_commit()
    assert dirty["dirty"] is True and dirty["untracked"] == ["src/my_mixer.py"] and dirty["untracked_count"] == 1
    from plots.provenance import commit_line

    assert "untracked: src/my_mixer.py" in commit_line(dirty) and "do not ship it" in commit_line(dirty)
    for i in range(provenance.UNTRACKED_LISTED + 2):
        (tmp_path / "src" / f"extra_{i:02d}.py").write_text("")
    many = provenance.git_commit()
    assert (
        len(many["untracked"]) == provenance.UNTRACKED_LISTED
        and many["untracked_count"] == provenance.UNTRACKED_LISTED + 3
    )
    assert "and 3 more" in commit_line(many)


def _run_with(tmp_path, seq_mixer: dict, **record):
    import json
    from src.systems.gpt2 import GPT2Settings

    settings = GPT2Settings().validate().to_dict()
    settings["model"]["seq_mixer"] = seq_mixer
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(
        json.dumps({"settings": settings, "command": "python -m runners.train --x", **record})
    )
    (run / "metrics_summary.json").write_text("{}")  # a finished run
    return run


def test_a_run_made_by_code_not_here_says_so_in_one_line(tmp_path, capsys):
    """The mixer's file is gone: the analysis names the mixer, the code that made the run and
    this checkout's fingerprint, and does not advise a retrain (the code is missing, not the run)."""
    from analysis import alignment

    run = _run_with(
        tmp_path,
        {"name": "my_mixer", "options": {}},
        code_fingerprint="feedfacefeedface",
        git={"commit": "a" * 40, "dirty": True, "untracked": ["src/models/mixers/my_mixer.py"]},
    )
    before = sorted(p.name for p in run.iterdir())
    assert alignment.main(["--run", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "seq_mixer 'my_mixer'" in err and "feedfacefeedface" in err
    assert "src/models/mixers/my_mixer.py" in err and provenance.code_fingerprint() in err
    assert "retraining here cannot help" in err and "--overwrite" not in err
    assert sorted(p.name for p in run.iterdir()) == before


def test_an_accepted_list_is_never_cut(tmp_path, capsys):
    from analysis import alignment
    from src.models.mixers.attention import LocalOptions

    run = _run_with(tmp_path, {"name": "local", "options": {"wndow": 3}})
    assert alignment.main(["--run", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert "options.wndow: unknown key" in err and all(
        f.name in err for f in __import__("dataclasses").fields(LocalOptions)
    )


def test_a_misspelt_entry_in_a_config_gets_the_nearest_name(tmp_path, capsys):
    from analysis import alignment

    run = _run_with(tmp_path, {"name": "softmax_casual", "options": {}})
    assert alignment.main(["--run", str(run)]) == 2
    assert "did you mean 'softmax_causal'?" in capsys.readouterr().err
