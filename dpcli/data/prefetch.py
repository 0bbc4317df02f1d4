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
from collections.abc import Generator, Iterable
from typing import TypeVar

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
