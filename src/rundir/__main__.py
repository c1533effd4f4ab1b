"""`python -m src.rundir [--figs] RUN [RUN ...]`: exit 1 naming every missing or corrupt
artifact of each run directory."""

import sys

from src.rundir.names import SUMMARY, attention_figure
from src.rundir.run import RunDir


def check_main(argv: list[str] | None = None) -> int:
    """`python -m src.rundir [--figs] RUN [RUN ...]`: exit 1 naming every missing artifact
    (--figs: also the quick attention heatmap of layer 0, head 0)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "-h" in args or "--help" in args:
        print(
            "usage: python -m src.rundir [--figs] RUN_DIR [RUN_DIR ...]\n\nCheck run directories: "
            "print `ok RUN_DIR` for each complete one, and exit 1 naming every missing or corrupt "
            "artifact with the command that makes it.\n\noptions:\n  --figs  also require the quick "
            "attention heatmap of layer 0, head 0 where attention was saved"
        )
        return 0
    with_figs = "--figs" in args
    runs = [a for a in args if a != "--figs"]
    if not runs or any(a.startswith("-") for a in runs):
        print(
            "usage: python -m src.rundir [--figs] RUN_DIR [RUN_DIR ...]  (exit 1 naming every missing artifact)",
            file=sys.stderr,
        )
        return 2
    from src.flags import dry_run

    if dry_run("python -m src.rundir", f"check {' '.join(runs)}"):
        return 0
    bad = 0
    for path in runs:
        run = RunDir(path)
        if not run.path.is_dir():
            missing = [f"MISSING {run.path} (no such run directory)"]
        else:
            names = run.missing_outputs()
            if with_figs and run.attention_saved():
                names += [n for n in (attention_figure(0, 0),) if not run.exists(n)]
            missing = [f"MISSING {run.file(n)} (create it with: {run.producer(n)})" for n in names]
            missing += [f"CORRUPT {err}" for err in run.corrupt_files()]
            if not missing and not run.is_trained():
                missing = [f"MISSING {run.file(SUMMARY)} (status is not 'complete')"]
        for line in missing:
            print(line, file=sys.stderr)
        if missing:
            bad += 1
        else:
            print(f"ok {run.path}")
    return 1 if bad else 0


if __name__ == "__main__":
    from src.process import guarded

    raise SystemExit(guarded(check_main))
