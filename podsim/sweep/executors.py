"""Where sweep points run: in this process, in a local process pool, or on a Dask cluster.

Each is a `concurrent.futures.Executor` with a number of slots (points in flight at once):
`serial` runs a point when it is submitted; `process` is a ProcessPoolExecutor whose workers
ignore SIGINT (the parent decides what an interrupt means) and start from a forkserver with
podsim imported; `dask` is `Client(address).get_executor()` on an existing scheduler, or on a
LocalCluster of single-threaded worker processes started here and closed on exit.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from podsim.errors import PodsimError

ExecutorKind = Literal["serial", "process", "dask"]


class SerialExecutor(Executor):
    """Runs each call at submit time, in this process (exceptions go to the future)."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        fut: Future = Future()
        fut.set_running_or_notify_cancel()
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt must reach the caller
            if isinstance(exc, KeyboardInterrupt):
                raise
            fut.set_exception(exc)
        return fut


@dataclass
class ExecutorHandle:
    """An executor, how many points it runs at once, and how to stop it at once."""

    executor: Executor
    slots: int
    kind: str
    description: str
    cluster: object = None
    client: object = None

    def abort(self) -> None:
        """Stop now (after an interrupt): cancel what waits, end what runs."""
        ex = self.executor
        if isinstance(ex, ProcessPoolExecutor):
            terminate = getattr(ex, "terminate_workers", None)  # Python >= 3.14
            if terminate is not None:
                terminate()
            else:
                for proc in list((getattr(ex, "_processes", None) or {}).values()):
                    proc.terminate()
            ex.shutdown(wait=False, cancel_futures=True)
        elif self.kind == "dask":
            ex.shutdown(wait=False)


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


@contextmanager
def open_executor(kind: ExecutorKind = "serial", workers: int | None = None, address: str | None = None) -> Iterator[ExecutorHandle]:
    """The executor for a sweep; closed (workers stopped, a local cluster shut down) on exit."""
    if address is not None and kind != "dask":
        raise PodsimError(f"--address names a Dask scheduler; use it with --executor dask (not {kind})")
    if workers is not None and workers < 1:
        raise PodsimError(f"workers must be >= 1, got {workers}")
    if kind == "serial":
        yield ExecutorHandle(SerialExecutor(), 1, kind, "serial (this process)")
        return
    if kind == "process":
        n = workers or default_workers()
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["podsim.sweep.run"])
        ex = ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=_ignore_sigint)
        handle = ExecutorHandle(ex, n, kind, f"process pool ({n} workers)")
        try:
            yield handle
        finally:
            ex.shutdown(wait=True, cancel_futures=True)
        return
    if kind != "dask":
        raise PodsimError(f"executor {kind!r}: use serial, process or dask")
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise PodsimError("the dask executor needs dask[distributed]: pip install 'podsim[dask]'") from None
    cluster = None
    try:
        if address is not None:
            try:
                client = Client(address, timeout="10s")
            except (OSError, TimeoutError) as exc:
                raise PodsimError(f"cannot reach the Dask scheduler at {address}: {' '.join(str(exc).split())}") from None
            desc = f"dask scheduler {address}"
        else:
            n = workers or default_workers()
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                                   silence_logs=40, worker_dashboard_address=None)
            client = Client(cluster)
            desc = f"dask LocalCluster ({n} workers)"
        slots = max(1, sum(client.nthreads().values()))
        handle = ExecutorHandle(client.get_executor(pure=False), slots, kind, desc, cluster, client)
        try:
            yield handle
        finally:
            client.close()
    finally:
        if cluster is not None:
            cluster.close()
