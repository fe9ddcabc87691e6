"""The worker processes of ``make demo`` and ``bz.benchmark(jobs=...)``: each with its share of the cores' threads."""
from __future__ import annotations

import os

from bayeszoo import workers


def _thread_counts() -> dict:
    """In a worker: its pid, the threads of each BLAS / OpenMP pool it has loaded, and its XLA flags."""
    from threadpoolctl import threadpool_info

    return {"pid": os.getpid(), "pools": sorted({info["num_threads"] for info in threadpool_info()}),
            "xla_flags": os.environ.get("XLA_FLAGS", "")}


def test_every_worker_of_a_pool_runs_its_share_of_the_threads():
    jobs = 2
    share = max(1, workers.usable_cores() // jobs)
    with workers.process_pool(jobs) as pool:
        seen = [pool.submit(_thread_counts).result() for _ in range(6)]
    assert {s["pid"] for s in seen} - {os.getpid()}, "the tasks ran in this process"
    assert all(s["pools"] and max(s["pools"]) <= share for s in seen), seen
    if share == 1:
        assert all("intra_op_parallelism_threads=1" in s["xla_flags"] for s in seen), seen
