"""The job engine: a study or sweep is a list of Jobs (a run directory to produce from one
Settings), planned against what is on disk and trained by an executor (registry "executor":
local child processes, or Ray tasks).

    engine     Job, plan (absent / incomplete / stale / complete / diverged), run_jobs
    runs_lock  the runs-directory lock: one sweep or study per runs directory
    local      the local executor: `python -m runners.run --config - --out DIR` child processes
    ray        the Ray executor: the same command as a Ray task, the run directory sent back
    study      what every study shares: its flags, its directories, plan -> train -> report
    results_csv   a sweep's results CSV (written atomically; a foreign one backed up first)
    grid, sweep   the order and noise sweeps (eval_order, eval_noise)
"""
