"""Trains the mechanisms paper's own code (limits_of_icl: its `nanogpt` wrapper model, its Gaussian
sampler, linear-regression tasks, curriculum, training loss and `train_utils.train_step`) for one
attention type and seed at a given protocol, then scores it on a fixed set of prompts and prints
one JSON line: the squared error / d per position (mean over the prompts), seconds, torch version,
parameter count.

Runs under a scratch environment's Python that has torch (and tqdm, which train_utils imports),
not ours; nothing here imports this repository:
    SCRATCH/bin/python scripts/originals/limits_of_icl_train.py CHECKOUT --attention favor --seed 0 \
        --prompts PROMPTS.npz --attention-kwargs '{"rf_dim": 64}'
PROMPTS.npz holds xs [B, n, d] and ys [B, n] (float32). The defaults are the mechanisms study's
cell and protocol (configs/mechanisms.yaml): width 64, 3 layers, 4 heads, d = 5, 11 points, a
position table for 17 points, batch 64, 7,000 steps of Adam (betas 0.9, 0.999, eps 1e-8, no weight
decay) on gradients clipped to global norm 10, the rate warmed up linearly over ceil(3 % of the
steps) to 2e-3 and then decayed linearly to 0 (a torch LambdaLR stepped after every update).
scripts/originals_beside_ours.py drives it.

The only departures from the original's train_utils.train: the optimizer (its is Adam at a constant
rate, unclipped) and the schedule, both set to our protocol; training on the CPU (no `.cuda()`);
no checkpoints or CSV log (the loss goes to stderr every --log-every steps).
"""

import argparse
import json
import math
import os
import sys
import time
from types import SimpleNamespace


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checkout", help="a checkout of kenzhengjk/limits_of_icl (holds src/wrapper_model.py)")
    p.add_argument("--attention", required=True, help="the original's attention_type (softmax_causal, favor, ...)")
    p.add_argument("--attention-kwargs", default="{}", help="its attention_kwargs as JSON (favor: rf_dim)")
    p.add_argument("--seed", type=int, required=True, help="torch.manual_seed: initialisation, features, data")
    p.add_argument("--prompts", required=True, help=".npz with xs [B, n, d] and ys [B, n]")
    p.add_argument("--steps", type=int, default=7000)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--warmup-fraction", type=float, default=0.03)
    p.add_argument("--grad-clip", type=float, default=10.0, help="global-norm clipping; 0: none")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--dims", type=int, default=5)
    p.add_argument("--points", type=int, default=11)
    p.add_argument("--n-positions", type=int, default=17, help="the position table covers 2 x this many tokens")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--log-every", type=int, default=500)
    p.add_argument("--eval-block", type=int, default=500, help="prompts scored at once")
    p.add_argument(
        "--checkpoint",
        default=None,
        help="keep the training state here every --checkpoint-every steps and continue from it when "
        "it exists (the same run: model, Adam, schedule, torch's generator; resumed bit for bit)",
    )
    p.add_argument("--checkpoint-every", type=int, default=250)
    # variants for finding where a difference comes from (the defaults are the original's FAVOR+)
    p.add_argument(
        "--favor-qk-scale",
        choices=("original", "ours"),
        default="original",
        help="original: q and k x K^-1/2 before the features (the kernel exp(q.k / K)); ours: x K^-1/4 "
        "(exp(q.k / sqrt K), softmax attention's), by rescaling what its _phi is given",
    )
    p.add_argument(
        "--favor-features",
        choices=("original", "orthogonal"),
        default="original",
        help="original: omega ~ N(0, 1) iid; orthogonal: blocks of orthogonal directions with chi norms "
        "(ours), drawn from the same torch generator",
    )
    return p.parse_args(argv)


def linear_warmup_decay(steps, fraction):
    """Our schedule's multiplier at update `s` (0-based; Hugging Face's linear schedule with
    warm-up, as src/optim.py's optax form: ceil(fraction * steps) warm-up updates from 0)."""
    warmup = max(1, math.ceil(fraction * steps))

    def factor(s):
        if s < warmup:
            return s / warmup
        return max(0.0, (steps - s) / max(1, steps - warmup))

    return factor


def favor_variants(model, args, torch):
    """--favor-qk-scale and --favor-features applied to a built model (nothing by default)."""
    import attentions

    cls = attentions.FAVORCausalSelfAttention
    if args.favor_qk_scale == "ours":
        original_phi = cls._phi

        def phi(self, x):  # the original scaled by K^-1/2; x K^1/4 makes it K^-1/4
            return original_phi(self, x * self.head_dim**0.25)

        cls._phi = phi
    if args.favor_features == "orthogonal":
        for module in model.modules():
            if isinstance(module, cls):
                size, count = module.omega.shape
                blocks = []
                for _ in range(math.ceil(count / size)):
                    q, r = torch.linalg.qr(torch.randn(size, size))
                    blocks.append(q * torch.sign(torch.diagonal(r)))
                directions = torch.cat(blocks, dim=1)[:, :count]
                module.omega.copy_(directions * torch.randn(size, count).norm(dim=0))


def main(argv):
    args = parse(argv)
    sys.path.insert(0, f"{args.checkout}/src")
    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    from curriculum import Curriculum
    from samplers import get_data_sampler
    from tasks import LinearRegression, get_task_sampler
    from train_utils import train_step
    from wrapper_model import build_model

    began = time.perf_counter()
    kwargs = json.loads(args.attention_kwargs)
    torch.manual_seed(args.seed)
    model = build_model(
        SimpleNamespace(
            family="nanogpt",
            n_dims=args.dims,
            n_positions=args.n_positions,
            n_embd=args.width,
            n_layer=args.layers,
            n_head=args.heads,
            attention_type=args.attention,
            attention_kwargs=kwargs,
        )
    )
    favor_variants(model, args, torch)
    model.train()

    class ClippedAdam(torch.optim.Adam):
        """Adam whose step first clips the gradients to a global norm (optax.clip_by_global_norm
        before optax.adam, as our optimizer); counts the steps it clipped."""

        clipped = 0

        def step(self, closure=None):
            if args.grad_clip > 0:
                params = [p for group in self.param_groups for p in group["params"] if p.grad is not None]
                norm = torch.nn.utils.clip_grad_norm_(params, args.grad_clip)
                ClippedAdam.clipped += int(norm > args.grad_clip)
            return super().step(closure)

    optimizer = ClippedAdam(model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, linear_warmup_decay(args.steps, args.warmup_fraction))
    fixed = lambda n: SimpleNamespace(start=n, end=n, inc=0, interval=2000)  # no curriculum: the full task
    curriculum = Curriculum(SimpleNamespace(dims=fixed(args.dims), points=fixed(args.points)))
    data = get_data_sampler("gaussian", n_dims=args.dims)
    tasks = get_task_sampler("linear_regression", args.dims, args.batch)

    losses, first, spent = [], 0, 0.0
    identity = {
        k: v
        for k, v in vars(args).items()
        if k not in ("checkpoint", "checkpoint_every", "log_every", "eval_block", "prompts", "checkout")
    }
    if args.checkpoint and os.path.exists(args.checkpoint):
        kept = torch.load(args.checkpoint, weights_only=False)
        if kept["identity"] != identity:
            raise SystemExit(f"{args.checkpoint} is another run's ({kept['identity']}); remove it or name another")
        model.load_state_dict(kept["model"])
        optimizer.load_state_dict(kept["optimizer"])
        scheduler.load_state_dict(kept["scheduler"])
        torch.set_rng_state(kept["rng"])
        curriculum.step_count = kept["curriculum_steps"]
        losses, first, spent, ClippedAdam.clipped = kept["losses"], kept["step"], kept["seconds_train"], kept["clipped"]
        print(f"resumed at step {first} from {args.checkpoint}", file=sys.stderr, flush=True)

    def keep(step):
        state = {
            "identity": identity,
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "rng": torch.get_rng_state(),
            "curriculum_steps": curriculum.step_count,
            "losses": losses,
            "step": step,
            "seconds_train": spent + time.perf_counter() - began,
            "clipped": ClippedAdam.clipped,
        }
        torch.save(state, args.checkpoint + ".tmp")
        os.replace(args.checkpoint + ".tmp", args.checkpoint)

    for i in range(first, args.steps):  # train_utils.train's loop, on the CPU
        xs = data.sample_xs(curriculum.n_points, args.batch, curriculum.n_dims_truncated)
        task = tasks()
        ys = task.evaluate(xs)
        loss, _ = train_step(model, xs, ys, optimizer, task.get_training_metric())
        scheduler.step()
        curriculum.update()
        losses.append(loss)
        if args.log_every and (i % args.log_every == 0 or i + 1 == args.steps):
            print(f"step {i} loss {loss:.5f} lr {scheduler.get_last_lr()[0]:.3g}", file=sys.stderr, flush=True)
        if args.checkpoint and ((i + 1) % args.checkpoint_every == 0 or i + 1 == args.steps):
            keep(i + 1)
    trained = spent + time.perf_counter() - began

    prompts = np.load(args.prompts)
    xs_all, ys_all = torch.from_numpy(prompts["xs"]).float(), torch.from_numpy(prompts["ys"]).float()
    dims = xs_all.shape[-1]
    metric = LinearRegression.get_metric()  # the original's point-wise squared error
    model.eval()
    errors = []
    with torch.no_grad():
        for start in range(0, len(xs_all), args.eval_block):
            xs, ys = xs_all[start : start + args.eval_block], ys_all[start : start + args.eval_block]
            errors.append(metric(model(xs, ys), ys).double())
    curve = (torch.cat(errors).mean(dim=0) / dims).tolist()
    print(
        json.dumps(
            {
                "attention_type": args.attention,
                "attention_kwargs": kwargs,
                "seed": args.seed,
                "favor_qk_scale": args.favor_qk_scale,
                "favor_features": args.favor_features,
                "curve": curve,
                "error_last": curve[-1],
                "prompts": list(xs_all.shape),
                "steps": args.steps,
                "final_loss_mean_last_100": float(np.mean(losses[-100:])),
                "clipped_steps": ClippedAdam.clipped,
                "seconds_train": trained,
                "seconds": spent + time.perf_counter() - began,
                "resumed_at": first or None,
                "torch": torch.__version__,
                "threads": torch.get_num_threads(),
                "parameters": sum(p.numel() for p in model.parameters()),
                "buffers": {name: list(b.shape) for name, b in model.named_buffers() if b.numel() > 1},
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
