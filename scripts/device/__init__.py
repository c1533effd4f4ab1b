"""The tools of a lent GPU (docs/workbench.md, "The GPU queue"): the queue of prepared device jobs
(gpu_queue.py, its jobs declared in gpu_queue_jobs.py), what runs on the device (gpu_job.py,
gpu_study.py, paper_scale.py, paper_cell_plan.py). The studies they run live in scripts/."""
