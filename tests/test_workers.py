"""The worker processes of ``make demo`` and ``bz.benchmark(jobs=...)``: each with its share of the cores' threads."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bayeszoo import workers


@pytest.fixture
def no_thread_settings(monkeypatch):
    """The environment of a user who set no thread counts."""
    for name in (*workers.THREAD_VARIABLES, "XLA_FLAGS"):
        monkeypatch.delenv(name, raising=False)


def test_the_worker_environment_gives_each_pool_its_share_and_keeps_the_users_settings(no_thread_settings,
                                                                                        monkeypatch):
    with workers.worker_environment(threads=1):
        assert all(os.environ[name] == "1" for name in workers.THREAD_VARIABLES)
        assert os.environ["XLA_FLAGS"] == workers.XLA_ONE_THREAD
    assert not any(name in os.environ for name in (*workers.THREAD_VARIABLES, "XLA_FLAGS"))
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=1")
    with workers.worker_environment(threads=1):
        assert os.environ["OMP_NUM_THREADS"] == "3" and os.environ["OPENBLAS_NUM_THREADS"] == "1"
        assert os.environ["XLA_FLAGS"] == f"--xla_force_host_platform_device_count=1 {workers.XLA_ONE_THREAD}"
    with workers.worker_environment(threads=2):   # two threads a pool: XLA keeps its own
        assert os.environ["OPENBLAS_NUM_THREADS"] == "2"
        assert os.environ["XLA_FLAGS"] == "--xla_force_host_platform_device_count=1"


def test_xla_takes_the_worker_flag():
    """XLA aborts on a flag it does not know (and silently ignores a word without ``--``): the flag must be one
    it knows, which this checks in a process of its own."""
    code = "import jax.numpy as jnp; print(float(jnp.ones(3).sum()))"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "XLA_FLAGS": workers.XLA_ONE_THREAD},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "3.0", out.stderr[-500:]


def _thread_counts() -> dict:
    """In a worker: its pid and the threads of each BLAS / OpenMP pool it has loaded."""
    from threadpoolctl import threadpool_info

    return {"pid": os.getpid(), "pools": sorted({info["num_threads"] for info in threadpool_info()})}


@pytest.mark.slow   # two spawned workers import bayeszoo
def test_every_worker_of_a_pool_runs_its_share_of_the_threads(no_thread_settings):
    jobs = 2
    share = max(1, workers.usable_cores() // jobs)
    with workers.process_pool(jobs) as pool:
        seen = [pool.submit(_thread_counts).result() for _ in range(4)]
    assert {s["pid"] for s in seen} - {os.getpid()}, "the tasks ran in this process"
    assert all(s["pools"] and max(s["pools"]) <= share for s in seen), seen
