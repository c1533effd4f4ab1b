"""A run directory made elsewhere (a Ray worker's .tar.gz of it) installed here like
`RunDir.commit`: unpacked beside its target, checked, swapped in."""

from __future__ import annotations

from pathlib import Path

from src.rundir.names import MARKER, SUMMARY
from src.rundir.run import RunDir
from src.rundir.staging import RunDirError, RunExists, fresh_staging, remove_stale_siblings, will_replace


def install_archive(path: Path, archive: bytes) -> bool:
    """Put a run directory made elsewhere (a .tar.gz of it, e.g. from a Ray worker) at `path`:
    unpacked into a staging sibling (tarfile's "data" filter: no absolute paths, no links out,
    no devices), then swapped in like `RunDir.commit`. It must carry our marker. An unfinished
    run (no summary) never replaces an existing one. Returns whether it was installed."""
    import io
    import tarfile

    path = Path(path)
    remove_stale_siblings(path)
    run = RunDir(fresh_staging(path))
    run.target = path
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            tar.extractall(run.path, filter="data")
        if not run.exists(MARKER):
            raise RunDirError(f"the run sent back for {path} has no {MARKER} marker; not installed")
        if will_replace(path):
            if not run.exists(SUMMARY):
                run.discard()
                return False
            if not RunDir(path).is_ours():
                raise RunExists(f"--out {path} is not a run directory made by this code; nothing was replaced")
        run.commit()
        return True
    except BaseException:
        run.discard()
        raise
