"""Training speed of the training-dynamics study (Zhang et al., ICML 2025): ms per full-batch epoch of the
original's default ATTN_M run (D = 4, P = 5,000 sequences of 32 tokens, 8 heads, 6,001 epochs),
and of the D = 8 rank-sweep run (P = 80,000, 9 heads, rank 1), with the FLOPs of an epoch (XLA's
count) and the fraction of this machine's matmul rate that makes. An epoch here works on the
training set's moments, computed once, so its products are small: the yardstick is a
[256, 256] @ [256, 256] product. Part of `make bench`.

    python -m scripts.bench.dynamics [--quick]
"""

from __future__ import annotations

import sys
import time

from src.flags import OneLineParser, dry_run, summary
from src.device_rate import matmul_rate
from src.loop import step_flops, train
from src.registry import choice
from src.systems.dynamics import DynamicsSettings, DynamicsTrain, DynamicsTrainer
from src.tasks.dynamics import DynamicsTaskConfig, make_sets

# name -> (task, model, train), the original's default runs
CASES = {
    "attnM_seed_default": (
        DynamicsTaskConfig(),
        ("attn_merged", {"heads": 8}),
        DynamicsTrain(epochs=6001, learning_rate=1e-3, init=1e-6),
    ),
    "attnS_D8_rank_sweep": (
        DynamicsTaskConfig(in_dim=8, trainset_size=80_000),
        ("attn_separate", {"heads": 9, "rank": 1}),
        DynamicsTrain(epochs=20_001, learning_rate=0.02, init=5e-3, log_every=50),
    ),
}
ANCHOR_MINUTES = {"attnM_seed_default": 40.0}  # the public PyTorch code on this kind of machine


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
        flops = step_flops(DynamicsTrainer(settings, sets))
        rows.append(
            {
                "flop_per_epoch": flops,
                "case": name,
                "epochs": epochs,
                "data_s": round(data_s, 2),
                "train_s": round(result.seconds, 2),
                "total_s": round(total, 2),
                "ms_per_epoch": round(1000 * result.seconds / epochs, 4),
                "anchor_minutes": ANCHOR_MINUTES.get(name),
            }
        )
    return rows


def main(argv=None) -> int:
    parser = OneLineParser(prog="python -m scripts.bench.dynamics", description=summary(__doc__))
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test of the benchmark")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if dry_run(parser.prog, "time the dynamics cases"):
        return 0
    rows = bench(quick=args.quick)
    rate = matmul_rate((256, 256))
    print(
        f"{'dynamics case':22} {'epochs':>7} {'ms/epoch':>9} {'MFLOP/epoch':>11} {'GFLOP/s':>8} {'of matmul':>9} "
        f"{'train s':>8} {'total s':>8} anchor (matmul [256, 256] @ [256, 256]: {rate / 1e9:.1f} GFLOP/s)"
    )
    for r in rows:
        anchor = f"{r['anchor_minutes']:.0f} min (public PyTorch code)" if r["anchor_minutes"] else ""
        flops = r["flop_per_epoch"]
        achieved = flops / (r["ms_per_epoch"] / 1000) if flops else None
        speed = (
            f"{flops / 1e6:11.3f} {achieved / 1e9:8.1f} {achieved / rate:9.3f}"
            if flops
            else f"{'n/a':>11} {'n/a':>8} {'n/a':>9}"
        )
        print(
            f"{r['case']:22} {r['epochs']:7d} {r['ms_per_epoch']:9.3f} {speed} {r['train_s']:8.2f} "
            f"{r['total_s']:8.2f} {anchor}"
        )
    return 0


if __name__ == "__main__":
    from src.process import guarded

    sys.exit(guarded(main))
