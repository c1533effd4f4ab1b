"""The GPU queue's declared jobs (run by scripts/device/gpu_queue.py): each Job's name, title, kind and its runs
(mechanisms), carried paths (speed) or Study (study: its command, its --quick rehearsal, parallel runs,
steps and Shape); BY_NAME maps a job's name to its Job. A study job's rehearsal trains one of its
mixers or positions (MAD: one task) at the quick size: the job's path end to end, cheaply enough for
the study tier; each study's own quick test trains the rest.
"""

from __future__ import annotations

from scripts.device.gpu_job import ORIGINALS, WHEELS, Job, Run, Shape, Study

ZOO_T64 = "configs/gpu/zoo_T64.yaml"
MATRIX_10X = "configs/gpu/matrix_settling_10x.yaml"
LSA_CAUSAL = "linear_attention:feature_map=identity:output_norm=none"  # one LSA layer's causal form
BASE_CONV = "base_conv+base_conv:kernel_size=-1"  # Zoology's BaseConv: a short and the long convolution
MAD_MODELS = "attention,hyena,mamba,gated_linear_attn,delta_net"  # the five models of MAD's table
CIRCUITS_GPT2 = "configs/gpu/circuits_probes.yaml"  # the circuits study's GPT-2 at Garg et al.'s standard size


def mad_study(config: str, tokens: int, tasks: str, rehearsal_mixer: str) -> Study:
    """A MAD job: the five models of MAD's table on a config's `tasks`, 15 runs together, 5,000 steps
    at MAD's width and batch (128, 128); `tokens` the longest task's sequence. Its rehearsal: the
    quick grid's form of the job's first task with one mixer (one run: the job's path through the
    study; the quick study's own test trains every task)."""
    return Study(
        ("scripts.mad", "--config", config, "--mixers", MAD_MODELS, "--jobs", "15"),
        ("scripts.mad", "--quick", "--tasks", tasks.split(",")[0], "--mixers", rehearsal_mixer),
        15,
        5000,
        Shape(128, 2, tokens, 128, 16),
        report_s=60.0,
    )


def circuits_study(part: str, runs: int, report_s: float) -> Study:
    """A circuits job: one part of scripts.circuits (--parts) with its `runs` runs together, 30,000 steps of
    the GPT-2 of CIRCUITS_GPT2; its rehearsal: the same part at the quick size of the default GPT-2."""
    return Study(
        ("scripts.circuits", "--config", CIRCUITS_GPT2, "--parts", part, "--jobs", str(runs)),
        ("scripts.circuits", "--quick", "--parts", part),
        runs,
        30000,
        Shape(256, 12, 22, 64),
        report_s=report_s,
    )


LOCAL_GLOBAL = ("model.attention_kwargs.local_window_size=15", "model.attention_kwargs.global_attn_indices=[20,40]")
JOBS = (
    Job(
        "mechanisms_a",
        "limits_of_icl at the paper's size (12 x 256, 8 heads, d = 20): softmax, FAVOR+, "
        "ReBased and local_global (window 15, globals [20, 40]) trained together, each evaluated at 40 "
        "examples on standard prompts and the three shifts",
        "mechanisms",
        (
            Run("softmax_causal", "softmax_causal"),
            Run("favor", "favor"),
            Run("rebased", "rebased"),
            Run("local_global", "local_global", LOCAL_GLOBAL),
        ),
    ),
    Job(
        "mechanisms_b",
        "the same for MQA, ReLA, linear and a second softmax seed",
        "mechanisms",
        (
            Run("mqa", "mqa"),
            Run("rela", "rela"),
            Run("linear", "linear"),
            Run("softmax_causal_seed1", "softmax_causal", ("training.seed=1",)),
        ),
    ),
    Job(
        "speed",
        "the paper cell's speed: every precision setting alone and 8 runs together, beside "
        "limits_of_icl's own step (float32, TF32) in the same call",
        "speed",
        carry=(WHEELS, ORIGINALS),
    ),
    Job(
        "circuits_probes",
        "the circuits study's probes at Garg et al.'s standard GPT-2 (12 x 256, 8 heads; d = 5, 11 points), "
        "30,000 steps (1/17 of Akyürek et al.'s released defaults), beside its fixed-w control: is w_OLS "
        "decodable at R² 0.9",
        "study",
        study=circuits_study("probes", 2, report_s=150.0),
    ),
    Job(
        "circuits_selection",
        "Bai et al.'s algorithm selection on the same GPT-2: the mixture model (σ ∈ {0.1, 0.5}) and the two "
        "single-noise models, 30,000 steps, at N = d = 5 against the Bayes ridge",
        "study",
        study=circuits_study("selection", 3, report_s=90.0),
    ),
    Job(
        "zoo_T64_a",
        "Zoology's figure-2 cell T = 64, κ = 4 at Zoology's protocol (V 8,192, width 64, "
        "Zoology's block, batch 512, 12,500 steps, its four learning rates): attention and BaseConv",
        "study",
        study=Study(
            ("scripts.zoo", "--config", ZOO_T64, "--mixers", f"attention,{BASE_CONV}", "--jobs", "8"),
            ("scripts.zoo", "--quick", "--mixers", "attention"),
            8,
            12500,
            Shape(64, 2, 64, 512, 8192),
            report_s=30.0,
        ),
    ),
    Job(
        "zoo_T64_b",
        "the same cell for H3 and Hyena",
        "study",
        study=Study(
            ("scripts.zoo", "--config", ZOO_T64, "--mixers", "h3,hyena", "--jobs", "8"),
            ("scripts.zoo", "--quick", "--mixers", "h3"),
            8,
            12500,
            Shape(64, 2, 64, 512, 8192),
            report_s=30.0,
        ),
    ),
    Job(
        "task_diversity_small",
        "Raventós et al.'s small model (4 x 64) at their protocol (batch 256, Adam 1e-3, "
        "triangle schedule), 50,000 steps (1/10 of theirs), pools 2^10 to 2^13 and fresh tasks: which side of "
        "their 2^11-2^12 threshold it falls",
        "study",
        study=Study(
            (
                "scripts.task_diversity",
                "--config",
                "configs/gpu/task_diversity_small.yaml",
                "--pools",
                "1024,2048,4096,8192,0",
                "--seeds",
                "0",
                "--jobs",
                "5",
            ),
            ("scripts.task_diversity", "--quick"),
            5,
            50000,
            Shape(64, 4, 32, 256),
        ),
    ),
    Job(
        "lengthgen_fire_rope",
        "the length study at Lin et al.'s model size (standard Llama, 16 x 256), FIRE and "
        "RoPE on linear regression, 20,000 steps (2/5 of theirs), evaluated out to 8x the trained length",
        "study",
        study=Study(
            (
                "scripts.lengthgen",
                "--config",
                "configs/gpu/lengthgen_fire_rope.yaml",
                "--positions",
                "fire,rope",
                "--tasks",
                "linear_regression",
                "--seeds",
                "0",
                "--jobs",
                "2",
            ),
            ("scripts.lengthgen", "--quick", "--positions", "fire", "--tasks", "linear_regression"),
            2,
            20000,
            Shape(256, 16, 102, 64),
            report_s=120.0,
        ),
    ),
    Job(
        "matrix_settling_10x_a",
        "the matrix's settling row linear_attention (at the zero predictor, 2.017 x GD's "
        "loss at 10,000 steps) at 10x its budget: 100,000 steps at both rates",
        "study",
        study=Study(
            ("scripts.matrix", "--config", MATRIX_10X, "--mixers", "linear_attention", "--jobs", "2"),
            ("scripts.matrix", "--quick", "--mixers", "linear_attention"),
            2,
            100000,
            Shape(64, 2, 22, 64),
        ),
    ),
    Job(
        "matrix_settling_10x_b",
        "the same for LSA's causal form (linear_attention, identity features, no output norm)",
        "study",
        study=Study(
            ("scripts.matrix", "--config", MATRIX_10X, "--mixers", LSA_CAUSAL, "--jobs", "2"),
            ("scripts.matrix", "--quick", "--mixers", LSA_CAUSAL),
            2,
            100000,
            Shape(64, 2, 22, 64),
        ),
    ),
    Job(
        "mad_a",
        "MAD's recall and copying tasks (in-context and fuzzy recall, selective copying) at MAD's width "
        "and batch (128, 128), 5,000 steps (1/4 of MAD's 200 epochs), for the five models of MAD's table",
        "study",
        study=mad_study("configs/gpu/mad_a.yaml", 256, "in_context_recall,fuzzy_recall,selective_copying", "attention"),
    ),
    Job(
        "mad_b",
        "the same for noisy recall, compression and memorization (memorization: MAD's 200 epochs)",
        "study",
        study=mad_study("configs/gpu/mad_b.yaml", 128, "noisy_recall,compression,memorization", "delta_net"),
    ),
)
BY_NAME = {job.name: job for job in JOBS}
