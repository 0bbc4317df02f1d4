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
