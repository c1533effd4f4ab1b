"""The local executor (src/jobs/local.py): runs side by side get one core each, so XLA's CPU
thread pool has one thread and the runs do not contend (`--share-cores` keeps them unpinned)."""

import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from src.process import CPU_ENV
from src.jobs.engine import Job
from src.jobs.local import LocalExecutorOptions, build_local
from src.provenance import usable_cores

ROOT = Path(__file__).resolve().parents[1]
# what a runner does first (src.process.guarded): keep to its core; then report where it may run
PROBE = (
    "import json, os, sys, time; sys.path.insert(0, sys.argv[1]); from src.process import pin_to_cpu; "
    "pin_to_cpu(); print(json.dumps([os.environ.get('ICL_WORKBENCH_CPU'), sorted(os.sched_getaffinity(0))])); "
    "time.sleep(1.0)"
)


@dataclass
class ProbeJob(Job):
    def command(self, overwrite: bool) -> list[str]:
        return [sys.executable, "-c", PROBE, str(ROOT)]

    def settings_json(self) -> str:
        return ""


def where_they_ran(launcher, count: int) -> list:
    jobs = [ProbeJob(f"probe{i}", None, Path(f"probe{i}")) for i in range(count)]
    with ThreadPoolExecutor(max_workers=count) as pool:
        results = list(pool.map(lambda job: launcher.run_job(job, overwrite=False), jobs))
    assert all(code == 0 for code, _, _ in results), results
    return [json.loads(output.strip().splitlines()[-1]) for _, output, _ in results]


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(usable_cores()) < 2, reason="needs Linux affinity and 2 cores"
)
def test_runs_side_by_side_get_a_core_each_and_share_cores_keeps_every_core(tmp_path):
    cores = list(usable_cores())
    launcher = build_local(LocalExecutorOptions(), runs_dir=tmp_path, log_dir=tmp_path, workers=2)
    seen = where_they_ran(launcher, 2)
    assert sorted(int(core) for core, _ in seen) == cores[:2]  # the two least used cores
    assert all(affinity == [int(core)] for core, affinity in seen)  # and kept to it
    assert launcher.running_on == {cores[0]: 0, cores[1]: 0}  # both given back

    shared = build_local(LocalExecutorOptions(share_cores=True), runs_dir=tmp_path, log_dir=tmp_path, workers=2)
    alone = build_local(LocalExecutorOptions(), runs_dir=tmp_path, log_dir=tmp_path, workers=1)
    assert shared.cores == () and alone.cores == () and CPU_ENV not in shared.env
    assert where_they_ran(shared, 2) == [[None, cores]] * 2
