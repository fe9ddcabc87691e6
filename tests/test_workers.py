"""The worker processes of ``make demo`` and ``bz.benchmark(jobs=...)``: forked only where that is safe, and each
with its share of the cores' threads however it started."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

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


@pytest.mark.skipif(sys.platform != "linux", reason="fork is used on Linux only")
def test_a_process_forks_its_workers_until_it_starts_jax_or_a_thread():
    """Run in a fresh interpreter: this test process has long started JAX's runtime."""
    script = textwrap.dedent("""
        import threading, time
        import bayeszoo
        from bayeszoo.workers import start_method
        print(start_method())
        stop = threading.Event()
        thread = threading.Thread(target=stop.wait)
        thread.start()
        print(start_method())
        stop.set(); thread.join()
        print(start_method())
        import jax.numpy as jnp
        jnp.ones(2).block_until_ready()
        print(start_method())
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.split() == ["fork", "spawn", "fork", "spawn"], out.stdout + out.stderr
