"""The reproduction's aggregations over its finished runs (make reproduce: scripts/reproduce.py and
scripts/reproduce_eval.py), each a function of run directories that returns JSON-ready results for
plots/paper_report.py: one_step_gd, k_steps, copy_model, ood_scales, distractors, nonlinear (the
sine regression), paper_checks (the paper's numbers beside ours); seed_runs reads a group of seeds."""
