"""A short run of every system of the workbench: the GD paper's two models, a mechanisms run with
its ICL curve against the baselines, MQAR with attention beside linear attention, a
length-generalisation curve and a training-dynamics staircase, with a line as each step starts
and ends, one every 15 s while it runs (its progress bar's latest state, with the time left) and
the path of every figure at the end. `make demo` runs it.

    python -m scripts.demo                  # into runs/demo/ (its own runs are replaced each time)
    python -m scripts.demo --out runs/demo2
    python -m scripts.demo --quick          # every step at a few steps: the same figures (the suite's check)

Every step is one of the workbench's own commands (printed as it starts, so each can be run alone
at full length). The copy model, the longest, trains beside the others: two processes, one core
and one XLA thread each. Each step's output is kept in <out>/logs/<step>.log.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from src.flags import OneLineParser, dry_run, summary
from src.process import guarded
from src.jobs.engine import child_env

PROG = "python -m scripts.demo"


@dataclass(frozen=True)
class Step:
    name: str  # the run directory's name under --out (an analysis: the run it reads)
    what: str  # one line for the reader
    argv: tuple  # the command after `python -m`, without its length and without --out / --run
    length: tuple = ()  # the flags that set how long it trains (and logs), at the demo's length
    quick: tuple = ()  # the same flags at --quick's length: a few steps, every figure still drawn
    analysis: bool = False  # reads the run `name` (--run) instead of training one (--out)

    def command_args(self, quick: bool) -> tuple:
        return self.argv + (self.quick if quick else self.length)


def _mqar_step(mixer: str, what: str) -> Step:
    """MQAR (κ = 4 pairs) on the ICL benchmark's recipe with `mixer`, 600 steps."""
    return Step(
        f"mqar_{mixer}",
        what,
        ("runners.recipe", "wandb:None", "task:mqar", f"model.seq_mixer:{mixer}", "--task.num_pairs", "4"),
        length=("--train.train_steps", "600", "--train.log_every", "50"),
        quick=("--train.train_steps", "20", "--train.log_every", "10"),
    )


STEPS = (
    Step(
        "gd_twolayer",
        "the GD paper: the copy model (softmax copy layer + GD layer), 5,000 steps at batch 2,048",
        ("runners.run_softmax_copy", "--save_attention"),
        length=("--steps", "5000"),
        quick=("--steps", "20"),
    ),
    Step(
        "gd_lsa1",
        "the GD paper: one linear self-attention layer against one GD step, 1,500 steps",
        ("runners.run_concat_inputs_targets", "--save_attention"),
        length=("--steps", "1500"),
        quick=("--steps", "20"),
    ),
    Step(
        "mechanisms_softmax",
        "limits_of_icl: softmax attention on regression (d = 5), ICL curve vs least "
        "squares, averaging, 3-NN and one GD step, 1,500 steps",
        (
            "runners.train",
            "--config",
            "configs/mechanisms.yaml",
            "--set",
            "training.eval_size=500",
        ),
        length=("--set", "training.train_steps=1500", "--set", "training.log_every=250"),
        quick=("--set", "training.train_steps=20", "--set", "training.log_every=10"),
    ),
    _mqar_step("attention", "the ICL benchmark: MQAR (κ = 4 pairs, T = 64) with softmax attention, 600 steps"),
    _mqar_step("linear_attention", "the ICL benchmark: the same with linear attention"),
    Step(
        "lengthgen_fire",
        "Lin et al.: FIRE on a small Llama, trained to 21 points, error out to 8x that",
        (
            "runners.train",
            "--config",
            "configs/lengthgen.yaml",
            "--set",
            "model.position=fire",
        ),
        length=("--set", "training.train_steps=800"),
        quick=("--set", "training.train_steps=20"),
    ),
    Step(
        "lengthgen_fire",
        "Lin et al.: the same run's error against least squares, averaging and 3-NN out to 8x the trained length",
        ("analysis.length_gen", "--factor", "8"),
        analysis=True,
    ),
    Step(
        "dynamics_rank1",
        "Zhang et al.: separate rank-one key-query heads, the staircase of principal components (the README's command)",
        (
            "runners.dynamics",
            "--model",
            "attnS",
            "--head",
            "5",
            "--init",
            "1e-2",
            "--lr",
            "0.02",
            "--show",
        ),
        length=("--epoch", "10001"),
        quick=("--epoch", "201"),
    ),
)
BESIDE = ("gd_twolayer",)  # trained in a second process beside the sequential rest
HEARTBEAT_S = 15  # while a step runs, a line at least this often: its progress bar's latest state


def command(step: Step, out: Path, quick: bool = False) -> list[str]:
    if step.analysis:
        return [sys.executable, "-m", *step.command_args(quick), "--run", str(out / step.name)]
    return [sys.executable, "-m", *step.command_args(quick), "--out", str(out / step.name), "--overwrite"]


def latest(log: Path) -> str:
    """The last line a step's log holds, or the latest state of a progress bar in it ('' when empty)."""
    try:
        with open(log, "rb") as handle:
            handle.seek(max(0, handle.seek(0, 2) - 4096))
            tail = handle.read().decode(errors="replace")
    except OSError:
        return ""
    parts = [part.strip() for part in re.split(r"[\r\n]", tail) if part.strip()]
    return parts[-1] if parts else ""


def shown(step: Step, out: Path, quick: bool = False) -> str:
    where = f" --{'run' if step.analysis else 'out'} {out / step.name}"
    return "python -m " + " ".join(step.command_args(quick)) + where


def figures(out: Path) -> list[Path]:
    return sorted(p for p in out.rglob("*.png") if "logs" not in p.parts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(prog=PROG, description=summary(__doc__))
    parser.add_argument("--out", default="runs/demo", help="where the demo's runs and figures go")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="every step at a few steps: the same commands and figures, in about 2 minutes",
    )
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    out = Path(args.out)
    if dry_run(PROG, f"train {len(STEPS)} {'very ' if args.quick else ''}short runs into {out}"):
        return 0
    (out / "logs").mkdir(parents=True, exist_ok=True)
    env = child_env(out, single_thread=True)
    start, total, failed = time.monotonic(), len(STEPS), []
    number = {s: i + 1 for i, s in enumerate(STEPS)}

    def begin(step: Step) -> tuple[subprocess.Popen, float]:
        print(f"[{number[step]}/{total}] {step.what}\n      $ {shown(step, out, args.quick)}", flush=True)
        log = open(out / "logs" / f"{number[step]}_{step.name}.log", "w")
        return subprocess.Popen(
            command(step, out, args.quick), stdout=log, stderr=subprocess.STDOUT, env=env
        ), time.monotonic()

    def end(step: Step, proc: subprocess.Popen, began: float) -> None:
        log = out / "logs" / f"{number[step]}_{step.name}.log"
        while True:
            try:
                code = proc.wait(timeout=HEARTBEAT_S)
                break
            except subprocess.TimeoutExpired:
                print(
                    f"[{number[step]}/{total}] {time.monotonic() - began:.0f} s: {latest(log) or 'starting'}",
                    flush=True,
                )
        lines = log.read_text(errors="replace").strip().splitlines()
        result = lines[-1] if lines else ""
        status = "done" if code == 0 else f"FAILED (exit {code}; see {log})"
        print(f"[{number[step]}/{total}] {status} in {time.monotonic() - began:.0f} s: {result}", flush=True)
        if code:
            failed.append(step.name)

    beside = [(s, *begin(s)) for s in STEPS if s.name in BESIDE]
    for step in (s for s in STEPS if s.name not in BESIDE):
        end(step, *begin(step))
    for step, proc, began in beside:
        end(step, proc, began)
    from plots.demo_figures import mqar_curves

    try:
        mqar_curves([out / "mqar_attention", out / "mqar_linear_attention"], out / "mqar_attention_vs_linear.png")
    except (OSError, ValueError, KeyError) as err:
        print(f"{PROG}: the MQAR comparison was not drawn ({err})", file=sys.stderr)
    print(f"\n{PROG}: {total - len(failed)} of {total} steps in {time.monotonic() - start:.0f} s; figures:")
    for path in figures(out):
        print(f"  {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(guarded(main))
