"""The run directory: the one contract between training, analyses, studies and plots.

names     the file names (src/rundir/names.py)
staging   safe creation and replacement (src/rundir/staging.py)
run       RunDir: atomic writes, checked reads (src/rundir/run.py)
completeness   RunDir's completeness checks (src/rundir/completeness.py)
archive   a run made elsewhere installed here (src/rundir/archive.py)
python -m src.rundir RUN ...   names every missing or corrupt artifact
"""

from src.rundir.names import *  # noqa: F401,F403 - the file names, as src.rundir.CONFIG etc.
from src.rundir.run import RunDir  # noqa: F401
from src.rundir.archive import install_archive  # noqa: F401
from src.rundir.staging import (  # noqa: F401
    CodeMissing,
    CorruptArtifact,
    MissingArtifact,
    RunDirError,
    RunExists,
    WrongSystem,
    fresh_staging,
    interrupted_note,
    remove_dead_temporaries,
    remove_stale_siblings,
    unsafe_target,
    will_replace,
)
