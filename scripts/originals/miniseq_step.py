"""Times training steps of the ICL benchmark's own code (miniseq's examples/icl_benchmark: its
TransformerBuilder model, MQAR examples from its tasks.py collated by miniseq.data, its nll_loss
over the target tokens, gradient clipping at 3 and AdamW) on the CPU. Prints a JSON line when
warmed up, then reads its standard input: each line read times one round of STEPS steps and
prints {"ms_per_step": ...}. The round's batches are drawn before its clock starts (the original
draws them in background workers), so only the model's step is timed.

Runs under a scratch environment's Python (torch, tyro, torchdata, flash-linear-attention), not
ours:
    SCRATCH/bin/python scripts/originals/miniseq_step.py CHECKOUT DTYPE COMPILE WIDTH LAYERS HEADS BATCH VOCAB SEQ_LEN
    PAIRS WARMUP STEPS
DTYPE is float32 or bfloat16 (the recipe's default), COMPILE 0 or 1 (torch.compile of the model,
the recipe's default). scripts/bench/compare_originals.py drives it; nothing here imports this repository.
"""

import json
import sys
import time


def main(argv):
    checkout, dtype_name, compiled = argv[0], argv[1], argv[2] == "1"
    width, layers, heads, batch, vocab, seq_len, pairs, warmup, steps = map(int, argv[3:12])
    sys.path[:0] = [checkout, f"{checkout}/examples/icl_benchmark"]
    import torch
    from miniseq.data import SequenceExample
    from miniseq.recipes.algorithm.instruction_tune import nll_loss
    from miniseq.transformer import AttentionConfig
    from miniseq.utils import default_dtype
    from model import ModelConfig, TransformerBuilder
    from tasks import MQARConfig, multiquery_ar_single

    torch.manual_seed(2)
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype_name]
    task = MQARConfig(input_seq_len=seq_len, vocab_size=vocab, num_kv_pairs=pairs)
    config = ModelConfig(
        model_dim=width, num_layers=layers, dtype=dtype, seq_mixer=AttentionConfig(num_heads=heads, num_kv_heads=heads)
    )
    config.output_dim = task.output_proj_dim()
    with default_dtype(dtype):
        model = TransformerBuilder(config, task.loss).build_model()
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    step_model = torch.compile(model, dynamic=False) if compiled else model
    generator = torch.Generator().manual_seed(2)

    def draw():
        examples = [SequenceExample(*multiquery_ar_single(generator, config=task)) for _ in range(batch)]
        return SequenceExample.collate(examples).as_auto_regressive()

    def step(inputs, targets):
        optimizer.zero_grad()
        loss = nll_loss(step_model, inputs, targets) / targets.num_target_elements
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 3.0)
        optimizer.step()
        return loss.detach().item()

    for _ in range(warmup):
        step(*draw())
    print(
        json.dumps(
            {
                "ready": True,
                "threads": torch.get_num_threads(),
                "torch": torch.__version__,
                "dtype": dtype_name,
                "compiled": compiled,
                "parameters": sum(p.numel() for p in model.parameters()),
            }
        ),
        flush=True,
    )
    for line in sys.stdin:  # one timed round per line read, until EOF
        batches = [draw() for _ in range(steps)]
        begin = time.perf_counter()
        for inputs, targets in batches:
            step(inputs, targets)
        print(json.dumps({"ms_per_step": 1000 * (time.perf_counter() - begin) / steps}), flush=True)


main(sys.argv[1:])
