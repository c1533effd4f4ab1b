"""Training speed of the training-dynamics study (Zhang et al., ICML 2025): ms per full-batch epoch of the
original's default ATTN_M run (D = 4, P = 5,000 sequences of 32 tokens, 8 heads, 6,001 epochs),
and of the D = 8 rank-sweep run (P = 80,000, 9 heads, rank 1). Part of `make bench`.

    python -m scripts.bench_dynamics [--quick]
"""
from __future__ import annotations

import sys
import time

from src.cli import OneLineParser, dry_run, summary
from src.loop import train
from src.registry import choice
from src.systems.dynamics import DynamicsSettings, DynamicsTrain, DynamicsTrainer
from src.tasks.linattn import DynamicsTaskConfig, make_sets

# name -> (task, model, train), the original's default runs
CASES = {
    "attnM_seed_default": (DynamicsTaskConfig(), ("attn_merged", {"heads": 8}),
                           DynamicsTrain(epochs=6001, learning_rate=1e-3, init=1e-6)),
    "attnS_D8_rank_sweep": (DynamicsTaskConfig(in_dim=8, trainset_size=80_000),
                            ("attn_separate", {"heads": 9, "rank": 1}),
                            DynamicsTrain(epochs=20_001, learning_rate=0.02, init=5e-3, log_every=50)),
}
ANCHOR_MINUTES = {"attnM_seed_default": 40.0}   # the public PyTorch code on this kind of machine


def bench(quick: bool = False) -> list[dict]:
    rows = []
    for name, (task, (model, options), tr) in CASES.items():
        if quick:
            task = DynamicsTaskConfig(in_dim=task.in_dim, trainset_size=500)
            tr = DynamicsTrain(epochs=201, learning_rate=tr.learning_rate, init=tr.init)
        settings = DynamicsSettings(task, choice("dynamics_model", model, **options), tr).validate()
        t0 = time.perf_counter()
        sets = make_sets(task)
        data_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        result = train(DynamicsTrainer(settings, sets))
        total = time.perf_counter() - t0
        epochs = len(result.per_step["loss"])
        rows.append({"case": name, "epochs": epochs, "data_s": round(data_s, 2),
                     "train_s": round(result.seconds, 2), "total_s": round(total, 2),
                     "ms_per_epoch": round(1000 * result.seconds / epochs, 4),
                     "anchor_minutes": ANCHOR_MINUTES.get(name)})
    return rows


def main(argv=None) -> int:
    parser = OneLineParser(prog="python -m scripts.bench_dynamics", description=summary(__doc__))
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test of the benchmark")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if dry_run(parser.prog, "time the dynamics cases"):
        return 0
    rows = bench(quick=args.quick)
    print(f"{'dynamics case':22} {'epochs':>7} {'ms/epoch':>9} {'train s':>8} {'total s':>8} anchor")
    for r in rows:
        anchor = f"{r['anchor_minutes']:.0f} min (public PyTorch code)" if r["anchor_minutes"] else ""
        print(f"{r['case']:22} {r['epochs']:7d} {r['ms_per_epoch']:9.3f} {r['train_s']:8.2f} "
              f"{r['total_s']:8.2f} {anchor}")
    return 0


if __name__ == "__main__":
    from src.cli import guarded

    sys.exit(guarded(main))
