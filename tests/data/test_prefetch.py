"""Read-ahead keeps a plain loop's order, errors and cleanup."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from dpcli.data.prefetch import prefetch


def test_items_arrive_in_order_from_one_worker_thread() -> None:
    threads: set[str] = set()

    def numbers() -> Iterator[int]:
        for i in range(1000):
            threads.add(threading.current_thread().name)
            yield i

    assert list(prefetch(numbers(), depth=3)) == list(range(1000))
    assert threads == {"dpcli-prefetch"}  # produced off the caller's thread, by one thread


def test_an_error_surfaces_where_a_plain_loop_would_raise_it() -> None:
    def failing() -> Iterator[int]:
        yield 1
        yield 2
        raise ValueError("bad row 3")

    seen = []
    with pytest.raises(ValueError, match="bad row 3"):
        for x in prefetch(failing()):
            seen.append(x)
    assert seen == [1, 2]


def test_stopping_early_stops_the_worker_and_closes_the_source() -> None:
    produced = []
    closed = threading.Event()

    def endless() -> Iterator[int]:
        try:
            i = 0
            while True:
                produced.append(i)
                yield i
                i += 1
        finally:
            closed.set()

    it = prefetch(endless(), depth=2)
    assert [next(it) for _ in range(5)] == [0, 1, 2, 3, 4]
    it.close()  # what a `break` or an exception in the caller's loop does
    assert closed.is_set()  # the generator's cleanup ran before close() returned
    assert len(produced) <= 5 + 2 + 1  # at most depth items and one in flight were read ahead


def test_depth_must_be_positive() -> None:
    with pytest.raises(ValueError):
        list(prefetch([1], depth=0))


def test_an_error_while_closing_the_source_reaches_the_caller() -> None:
    class Source:
        def __init__(self) -> None:
            self.items = iter([1, 2])

        def __iter__(self) -> Source:
            return self

        def __next__(self) -> int:
            return next(self.items)

        def close(self) -> None:
            raise OSError("close failed")

    with pytest.raises(OSError, match="close failed"):  # not a hang
        assert list(prefetch(Source())) == [1, 2]
