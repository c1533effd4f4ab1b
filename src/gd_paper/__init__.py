"""The room of von Oswald et al.'s system ("Transformers learn in-context by gradient descent",
ICML 2023; SPEC.md): everything of that paper's system that is not a registry entry, under one
name. The house reads it at the levels of what each module is (tests/test_house.py):

    config.py        its settings' parts (TaskConfig, ModelConfig, CurriculumConfig, TrainConfig)
    curricula.py     noise, ordering and placement of the context pairs (SPEC §7; the GPT-2
                     family's pair curriculum reuses them)
    metrics.py       the paper's loss and its comparison with one GD step (align_cos, ...)
    models/          the attention-only models (lsa, attention_only) and their token layouts
    eval_set.py      the fixed evaluation set and GD tuned on held-out tasks
    presets.py       the paper's models by name (lsa1, lsa_rec, twolayer, ...)
    sweep.py         the order and noise sweeps (eval_order, eval_noise), sweep_grid.py their grid
    study/           the reproduction's aggregations over its runs (make reproduce:
                     scripts/reproduce.py): one GD step, K steps, the copy model, OOD scales,
                     distractors, the sine regression, the paper's checks

Its registry entries live with their kinds, as every system's do: the systems `lsa` and
`nonlinear` (src/systems/), their tasks (src/tasks/regression.py, nonlinear.py, paper_form.py), the
GD baselines (baselines/gd_step.py, gd_plus.py, kernel.py), the copy probe (src/probes/) and the
command lines of its README (src/cli/lsa.py behind runners/, eval_order.py, eval_noise.py).
"""
