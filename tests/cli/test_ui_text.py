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


LINES = ["noise dominates the AUC: its 90 % interval is [0.500, 0.900]. Spend more ε " * 3,
         "a [bold]x[/bold] path /tmp/[a]", "multi\nline\nwarning", "ends with a newline\n",
         "trailing space ", "  leading", "ünïcödé — ε ≤ 1 · 中文 " * 5, "emoji :smile: 💡", "",
         "x" * 300, "tab\there", "cr\rhere", "esc\x1b[31mred", "bell\x07", "sep\u2028x"]


def test_warnings_without_a_terminal_are_rich_s_text_without_importing_rich(tmp_path) -> None:
    # a quiet run that only warns writes its lines itself; they must be what rich's console
    # writes (tabs expanded and control characters removed by rich: those lines go to it)
    import subprocess
    import sys

    code = ("import sys\n"
            "from dpcli.cli.ui import UI\n"
            f"lines = {LINES!r}\n"
            "ui = UI(quiet=True)\n"
            "for t in lines:\n"
            "    if all(part.isprintable() for part in t.split('\\n')):\n"
            "        ui.warn(t); ui.error(t)\n"
            "print('rich' in sys.modules)\n"
            "sys.stderr.write('=====\\n')\n"
            "for t in lines:\n"
            "    UI(quiet=True).warn(t); UI().error(t)\n"
            "sys.stderr.write('=====\\n')\n"
            "rich = UI(quiet=True); rich.err\n"   # the console made: rich writes
            "for t in lines:\n"
            "    rich.warn(t); rich.error(t)\n")
    err_file = tmp_path / "err.txt"
    with err_file.open("w", encoding="utf-8") as err:
        r = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=err,
                           text=True, timeout=120,
                           env={**_plain_env(), "PYTHONIOENCODING": "utf-8"})
    assert r.returncode == 0, err_file.read_text()
    assert r.stdout.strip() == "False"  # printable lines only: no rich
    _, mine, theirs = err_file.read_text(encoding="utf-8").split("=====\n")
    assert mine == theirs
    assert "warning: tab    here" in theirs and "warning: crhere" in theirs


def _plain_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items()
            if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "NO_COLOR")}
