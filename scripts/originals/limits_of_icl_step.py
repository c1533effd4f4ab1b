"""Times training steps of the mechanisms paper's own code (limits_of_icl: its `nanogpt` wrapper
model, Adam, Garg's Gaussian inputs and linear-regression tasks drawn each step, as its
train_utils.train does, on the CPU). Prints a JSON line when warmed up, then reads its standard
input: each line read times one round of STEPS steps and prints {"ms_per_step": ...}.

Runs under a scratch environment's Python that has torch and transformers, not ours:
    SCRATCH/bin/python scripts/originals/limits_of_icl_step.py CHECKOUT WIDTH LAYERS HEADS BATCH DIMS POINTS WARMUP
    STEPS [DEVICE [TF32]]
DEVICE cpu (default) or cuda: on cuda the step is train_utils.train's (inputs and tasks drawn on
the CPU, `.cuda()`, the point-wise metric on the GPU, `loss.item()`); TF32 1 allows TF32 matrix
passes. scripts/bench/compare_originals.py and scripts/device/paper_scale.py drive it; nothing here
imports this repository.
"""

import json
import sys
import time
from types import SimpleNamespace


def main(argv):
    checkout = argv[0]
    width, layers, heads, batch, dims, points, warmup, steps = map(int, argv[1:9])
    device = argv[9] if len(argv) > 9 else "cpu"
    tf32 = len(argv) > 10 and argv[10] == "1"
    sys.path.insert(0, f"{checkout}/src")
    import torch
    from samplers import get_data_sampler
    from tasks import get_task_sampler
    from wrapper_model import build_model

    torch.manual_seed(0)
    model = build_model(
        SimpleNamespace(
            family="nanogpt",
            n_dims=dims,
            n_positions=points,
            n_embd=width,
            n_layer=layers,
            n_head=heads,
            attention_type="softmax_causal",
            attention_kwargs={},
        )
    )
    model.train()
    if device == "cuda":
        model.cuda()
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    data, tasks = get_data_sampler("gaussian", n_dims=dims), get_task_sampler("linear_regression", dims, batch)

    def step():
        xs = data.sample_xs(points, batch, dims)
        task = tasks()
        ys = task.evaluate(xs)
        if device == "cuda":
            xs, ys = xs.cuda(), ys.cuda()
        optimizer.zero_grad()
        output = model(xs, ys)
        loss = task.get_training_metric()(output, ys)
        loss.backward()
        optimizer.step()
        if device == "cuda":  # its point-wise metric, on the GPU
            task.get_metric()(output.detach(), ys).mean(dim=0)
        return loss.detach().item()  # the original reads the loss every step

    for _ in range(warmup):
        step()
    print(
        json.dumps(
            {
                "ready": True,
                "threads": torch.get_num_threads(),
                "torch": torch.__version__,
                "device": device,
                "tf32": tf32,
                "parameters": sum(p.numel() for p in model.parameters()),
            }
        ),
        flush=True,
    )
    for line in sys.stdin:  # one timed round per line read, until EOF
        begin = time.perf_counter()
        for _ in range(steps):
            step()
        print(json.dumps({"ms_per_step": 1000 * (time.perf_counter() - begin) / steps}), flush=True)


main(sys.argv[1:])
