"""bz.benchmark on a Dask cluster as users deploy one: a ``dask scheduler`` and ``dask worker`` processes started
from the command line on this machine's loopback. The leaderboard equals a single-process run's; a worker killed
in the middle costs at most the task it was running; a run started again recomputes nothing."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pandas as pd
import pytest

import bayeszoo as bz
from tests.helpers import env_with_root

distributed = pytest.importorskip("distributed")

DASK = os.path.join(os.path.dirname(sys.executable), "dask")
TARGETS = ["exact/correlated_gaussian", "exact/banana", "exact/mixture"]
BACKENDS = ["iid_exact", "iid_costly"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args, env, log):
    return subprocess.Popen([DASK, *args], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _stop(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture
def cluster(tmp_path, fake_samplers):
    """(address, start_worker, calls): a scheduler on loopback; start_worker() adds a worker process (the fake
    samplers importable there, as a user's own module would be installed) and returns it."""
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    calls = tmp_path / "calls.log"
    env = env_with_root(BZ_FAKE_LOG=str(calls), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    log = open(tmp_path / "dask.log", "w")
    procs = [_start(["scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"], env, log)]

    def start_worker(name):
        proc = _start(["worker", address, "--nthreads", "1", "--no-nanny", "--name", name, "--no-dashboard"],
                      env, log)
        procs.append(proc)
        return proc

    yield address, start_worker, lambda: calls.read_text().splitlines() if calls.exists() else []
    for proc in reversed(procs):
        _stop(proc)
    log.close()


def _import_the_package():
    import bayeszoo.benchmark  # noqa: F401


def _client(address, n_workers):
    """A client of ``n_workers`` workers that have imported the package (seconds each), so that they start on the
    tasks together: the benchmark's check that the workers load the session's backends, before the first task,
    warms one of them only."""
    client = distributed.Client(address, timeout="60s")
    client.wait_for_workers(n_workers, timeout=120)
    client.run(_import_the_package)
    return client


@pytest.mark.slow   # two minutes: three processes start and import the package
def test_the_cluster_gives_the_single_process_leaderboard_and_survives_a_killed_worker(cluster, tmp_path):
    address, start_worker, calls = cluster
    first = start_worker("w1")
    start_worker("w2")
    client = _client(address, 2)
    kw = dict(seeds=[0, 1], draws=300, chains=2, progress=False)
    try:
        # a worker killed once the first results are in: its running task goes to the other one
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(bz.benchmark, TARGETS, BACKENDS, out=tmp_path / "run", executor=client, **kw)
            deadline = time.time() + 300
            while len(calls()) < 2 and time.time() < deadline and not running.done():
                time.sleep(0.05)
            first.kill()
            board = running.result(timeout=600)
    finally:
        client.close()
    tasks = len(TARGETS) * len(BACKENDS) * 2
    assert board.table()["status"].eq("ok").all() and len(board.table()) == tasks
    # at most the task the killed worker was running runs twice: its finished ones, whose results Dask lost with it
    # and runs again, are read back from their files
    assert tasks <= len(calls()) <= tasks + 1
    ran = {tuple(line.split()) for line in calls()}
    assert ran == {(b, t.split("/")[1], str(s)) for t in TARGETS for b in BACKENDS for s in (0, 1)}
    local = bz.benchmark(TARGETS, BACKENDS, **kw)
    cols = ["target", "backend", "seed", "status", "gradients_to_target", "worth_draws", "mean_err", "sd_err"]
    pd.testing.assert_frame_equal(board.table()[cols], local.table()[cols])
    pd.testing.assert_frame_equal(board.summary(), local.summary())

    # started again on the cluster: every task is read back, none runs
    before = len(calls())
    client = _client(address, 1)
    try:
        again = bz.benchmark(TARGETS, BACKENDS, out=tmp_path / "run", executor=client, **kw)
    finally:
        client.close()
    assert len(calls()) == before
    pd.testing.assert_frame_equal(again.table()[cols], board.table()[cols])
