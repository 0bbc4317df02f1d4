"""The terminal prints dpcli's text as written: no markup, no emoji codes."""

from __future__ import annotations

import pytest

from dpcli.cli.ui import UI


def test_colon_words_are_not_turned_into_emoji(capsys: pytest.CaptureFixture[str]) -> None:
    # step and metric names look like rich's emoji codes: cell:label:, counts:sex:
    UI().result("cell:label: counts:smile: [bold]x[/bold]")
    UI().say("mean:heart: step")
    out, err = capsys.readouterr()
    assert "cell:label: counts:smile: [bold]x[/bold]" in out
    assert "mean:heart: step" in err


def test_a_slow_rate_reads_as_seconds_per_unit() -> None:
    """A 14-minute train-brc printed "0 fits/s"; below one a second the rate is inverted."""
    from dpcli.cli.ui import _rate

    assert _rate(5000.4, "rows") == "5,000 rows/s"
    assert _rate(3.21, "fits") == "3.2 fits/s"
    assert _rate(0.02, "fits") == "50 s per fit"
    assert _rate(0.0, "rows") == "0 rows/s"
