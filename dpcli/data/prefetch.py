"""Read ahead: run a batch iterator in a background thread while the caller works.

Why: a statistics pass has two halves of similar cost — decoding and
encoding a batch (pyarrow's CSV/Parquet readers and compute kernels, which
release the GIL) and folding it into the accumulators (numpy, which mostly
releases it too). Running the first half one batch ahead in its own thread
lets the two overlap on a second core. The iterator itself still runs in ONE
thread, in order, so everything it does (the encoder's counters, the per-row
token cap's random draws, the row numbers in error messages) is exactly what
a plain loop would do: the same batches in the same order. The caller must
not draw from a generator the iterator also draws from while a read-ahead is
live (dpcli's encoders draw their token seeds once, when they are created).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Generator, Iterable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:   # the thread pools' own imports stay lazy (a command's fixed cost)
    from collections import deque
    from concurrent.futures import Future

T = TypeVar("T")

_DONE = object()
_live: dict[threading.Thread, threading.Event] = {}  # running read-aheads and their stop flags


class _Failed:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def prefetch(items: Iterable[T], depth: int = 2) -> Generator[T, None, None]:
    """Yield ``items`` in order, produced up to ``depth`` ahead by a worker thread.

    An exception raised by ``items`` is re-raised here, at the position where
    a plain loop would have raised it. If the caller stops early (break, an
    exception, garbage collection), the worker stops after its current item.
    """
    if depth < 1:
        raise ValueError("depth must be at least 1")
    buffer: queue.Queue[object] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                buffer.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    source = iter(items)

    def work() -> None:
        end: object = _DONE
        try:
            for item in source:
                if not put(item):
                    break  # the consumer stopped
        except BaseException as exc:  # handed to the consumer, who re-raises it
            end = _Failed(exc)
        try:
            close = getattr(source, "close", None)
            if close is not None:  # a generator's cleanup (open files) runs here, not at GC
                close()
        except BaseException as exc:  # the consumer must hear of it, or it would wait forever
            if end is _DONE:
                end = _Failed(exc)
        put(end)  # a no-op once the consumer has stopped

    worker = threading.Thread(target=work, name="dpcli-prefetch", daemon=True)
    worker.start()
    _live[worker] = stop
    try:
        while True:
            item = buffer.get()
            if item is _DONE:
                return
            if isinstance(item, _Failed):
                raise item.exc
            yield item  # type: ignore[misc]
    finally:
        stop.set()
        worker.join()
        _live.pop(worker, None)


def stop_all(timeout: float = 10.0) -> list[str]:
    """Stop and join every read-ahead still running; the names of any that did not end.

    A read-ahead ends with its consumer (the generator's ``finally``); one whose
    consumer was dropped without being closed would otherwise still be inside
    pyarrow when the interpreter exits, which can abort the process. Called by
    the entry point before it exits.
    """
    for stop in list(_live.values()):
        stop.set()
    stuck = []
    for worker in list(_live):
        worker.join(timeout)
        if worker.is_alive():
            stuck.append(worker.name)
        else:
            _live.pop(worker, None)
    return stuck


# ------------------------------------------------------------------ all cores

#: environment variable that fixes the number of worker threads of a pass (and pyarrow's
#: CPU pool): for benchmarks that compare core counts, or to leave cores to other work
THREADS_ENV = "DPCLI_THREADS"


def usable_cores() -> int:
    """Worker threads for a pass: ``DPCLI_THREADS`` if set, else the CPUs this process may
    run on (``taskset`` and container CPU sets are respected; ``os.cpu_count`` is not)."""
    import os

    text = os.environ.get(THREADS_ENV, "").strip()
    if text:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            from dpcli.errors import UsageError

            raise UsageError(f"{THREADS_ENV} must be a positive whole number, got {text!r}")
        return value
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):  # not on Linux
        return max(os.cpu_count() or 1, 1)


def settle(waiting: deque[Future[int]], keep: int,
           progress: Callable[[int], None] | None = None) -> None:
    """Wait for the oldest of ``waiting`` until at most ``keep`` are left, passing each
    result (a count of work done) to ``progress``: a thread pool's bounded queue, in order."""
    while len(waiting) > keep:
        done = waiting.popleft().result()
        if progress is not None:
            progress(done)


def configure_arrow(threads: int) -> None:
    """Size pyarrow's CPU pool to ``threads`` (it counts the machine's cores, not the CPUs
    this process may use: under ``taskset -c 0`` it would still start one per core)."""
    import pyarrow as pa

    if pa.cpu_count() != threads:
        pa.set_cpu_count(threads)


U = TypeVar("U")


def ordered_map(items: Iterable[T], fn: Callable[[T], U], workers: int,
                depth: int | None = None) -> Generator[U, None, None]:
    """Yield ``fn(item)`` for each item, in the order of ``items``, computed by ``workers``
    threads (at most ``depth`` items in flight: memory stays bounded).

    Why threads, not processes: the work per item is numpy and pyarrow kernels over
    tens of thousands of values, which release the GIL, and a batch handed to a thread
    is not copied. Why in order: the caller folds the results in the order a plain loop
    would (so float sums are the same bit for bit whatever the number of workers), and
    an error is raised at the first item that fails in ``items``' order, as a plain loop
    would raise it. ``items`` itself is iterated in the calling thread, in order.
    With ``workers == 1`` this is a plain loop (no thread at all).
    """
    if workers <= 1:
        for item in items:
            yield fn(item)
        return
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    limit = depth if depth is not None else 2 * workers
    pending: deque[Future[U]] = deque()
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dpcli-pass")
    try:
        source = iter(items)
        while True:
            try:
                item = next(source)
            except StopIteration:
                break
            except BaseException:
                # the items before the failing one come first, as in a plain loop (one of
                # them may fail itself, and that error is the one a plain loop would show)
                while pending:
                    yield pending.popleft().result()
                raise
            pending.append(pool.submit(fn, item))
            while len(pending) >= limit or (pending and pending[0].done()):
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()
        pool.shutdown(wait=True, cancel_futures=True)
        close = getattr(items, "close", None)
        if close is not None:  # a generator's cleanup (open files) runs here, not at GC
            close()
