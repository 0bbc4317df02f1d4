"""Every command has help with an example, and the README documents it."""

from __future__ import annotations

from pathlib import Path

import pytest

COMMANDS = [["init"], ["schema", "suggest"], ["inspect"], ["tabulate"], ["select-features"],
            ["train-nb"], ["train-brc"], ["validate"], ["predict"],
            ["roc"], ["evaluate"], ["publish-grid"], ["synthesize"], ["show"], ["ledger", "init"],
            ["ledger", "show"], ["ledger", "verify"], ["ledger", "raise"], ["ledger", "repair"]]
README = (Path(__file__).parents[2] / "README.md").read_text()


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_has_example_and_readme_mentions_it(cli, command: list[str]) -> None:
    r = cli(*command, "--help")
    assert r.exit_code == 0
    assert "Example" in r.stdout
    assert f"dpcli {' '.join(command)}" in README


def test_all_commands_are_listed() -> None:
    from dpcli.cli.app import app

    names = {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}
    assert names == {"init", "inspect", "tabulate", "select-features", "train-nb", "train-brc",
                     "validate", "predict", "roc", "evaluate", "publish-grid", "synthesize",
                     "show", "ledger", "schema"}


def test_top_level_help_and_version(cli) -> None:
    r = cli("--help")
    assert r.exit_code == 0 and "replace-one" in r.stdout
    r = cli("--version")
    assert r.exit_code == 0 and r.stdout.startswith("dpcli ")


def test_help_does_not_import_heavy_modules() -> None:
    import subprocess
    import sys

    code = ("import sys, dpcli.cli.app as a\n"
            "heavy = [m for m in ('numpy', 'pandas', 'pyarrow', 'scipy') if m in sys.modules]\n"
            "print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
