"""The training-code fingerprint: stable, and changed by any edit of the training code."""
import shutil

from src import provenance


def test_fingerprint_is_stable_and_tracks_edits(tmp_path, monkeypatch):
    for folder in provenance.TRAINING_SOURCES:
        shutil.copytree(provenance.ROOT / folder, tmp_path / folder)
    monkeypatch.setattr(provenance, "ROOT", tmp_path)
    first = provenance.code_fingerprint()
    assert first == provenance.code_fingerprint() and len(first) == 16
    path = tmp_path / "src" / "tasks" / "regression.py"   # sub-packages count too
    path.write_text(path.read_text() + "\n# an edit\n")
    assert provenance.code_fingerprint() != first
