"""dpcli.signals: a signal during a ledger append is held, then ends the run."""

from __future__ import annotations

import signal
import threading

import pytest

from dpcli import signals


@pytest.fixture
def installed():
    # the suite may itself run under nohup or as a background job, which ignore SIGHUP or
    # SIGINT; install() rightly keeps an ignored signal ignored, so start from the defaults
    found = {sig: signal.getsignal(sig) for sig in signals.HANDLED}
    for sig in signals.HANDLED:
        signal.signal(sig, signal.SIG_DFL if sig != signal.SIGINT else signal.default_int_handler)
    signals.install()
    try:
        yield
    finally:
        signals.restore()
        signals._state.update(holding=0, pending=None, ending=False)
        for sig, handler in found.items():
            signal.signal(sig, handler)


def _send(sig: int) -> None:
    signal.pthread_kill(threading.get_ident(), sig)  # delivered to this (the main) thread


def test_a_signal_outside_a_held_block_raises_at_once(installed) -> None:
    with pytest.raises(signals.Terminated) as info:
        _send(signal.SIGHUP)
        for _ in range(1000):  # the handler runs between bytecodes
            pass
    assert info.value.exit_code == 129 and "SIGHUP" in info.value.message


def test_a_held_signal_is_raised_when_the_block_ends(installed) -> None:
    done = []
    with pytest.raises(signals.Terminated) as info, signals.held():
        _send(signal.SIGTERM)
        done.append("append finished")  # the block is not cut
    assert done == ["append finished"] and info.value.exit_code == 143


def test_keep_defers_the_signal_to_deliver(installed) -> None:
    with signals.held(keep=True):
        _send(signal.SIGINT)
    with pytest.raises(signals.Terminated) as info:
        signals.deliver()
    assert info.value.exit_code == 130 and info.value.message == "interrupted"
    signals.deliver()  # delivered once only


def test_an_ignored_signal_stays_ignored() -> None:
    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        signals.install()
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN  # nohup keeps working
        assert signal.getsignal(signal.SIGTERM) == signals._handler
        signals.restore()
        assert signal.getsignal(signal.SIGTERM) != signals._handler
    finally:
        signal.signal(signal.SIGHUP, old)
        signals._state.update(holding=0, pending=None, ending=False)
