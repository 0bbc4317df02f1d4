"""The --out collision matrix: no command's output may replace the ledger, its companions,
the spec, a file the spec names or an input, whatever the spelling (issue 19, failure 2)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from dpcli.cli.app import app
from tests.cli.conftest import SCHEMA, base_spec, toy_frame


def _run(*args: object):
    r = CliRunner().invoke(app, [str(a) for a in args])
    return r.exit_code, r.stderr


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project whose schema is a file of its own, with a model and a synopsis (ε 0.6 of 2)."""
    root = tmp_path_factory.mktemp("collide")
    (root / "vocab.txt").write_text("alpha\nbeta\ngamma\ndelta\nomega\n")
    schema = yaml.safe_load(yaml.safe_dump(SCHEMA))
    schema["columns"]["age"]["taxonomy"] = {"bins": [2, 4]}
    (root / "schema.yaml").write_text(yaml.safe_dump(schema))
    spec = base_spec()
    spec["schema"] = "schema.yaml"
    spec["budget"]["epsilon"] = 2.0
    (root / "spec.yaml").write_text(yaml.safe_dump(spec))
    toy_frame().to_parquet(root / "toy.parquet", index=False)
    code, err = _run("ledger", "init", "--spec", root / "spec.yaml")
    assert code == 0, err
    code, err = _run("train-nb", root / "toy.parquet", "--spec", root / "spec.yaml",
                     "--out", root / "nb.json", "--epsilon", 0.3, "--seed", 1, "-q")
    assert code == 0, err
    code, err = _run("publish-grid", root / "toy.parquet", "--spec", root / "spec.yaml",
                     "--out", root / "syn", "--epsilon", 0.3, "--seed", 1, "-q")
    assert code == 0, err
    (root / "sub").mkdir()
    (root / "link.parquet").symlink_to(root / "toy.parquet")
    os.link(root / "toy.parquet", root / "hard.parquet")
    (root / "ledger-link.jsonl").symlink_to(root / "ledger.jsonl")
    return root


TARGETS = {
    "ledger": "ledger.jsonl",
    "key": "ledger.jsonl.key",
    "lock": "ledger.jsonl.lock",
    "ledger via a symlink": "ledger-link.jsonl",
    "spec": "spec.yaml",
    "schema file": "schema.yaml",
    "vocabulary": "vocab.txt",
    "data, same path": "toy.parquet",
    "data, another spelling": "sub/../toy.parquet",
    "data, a symlink": "link.parquet",
    "data, a hard link": "hard.parquet",
    "model": "nb.json",
    "synopsis grid.json": "syn/grid.json",
    "synopsis cells": "syn/cells.parquet",
}
WITH_SPEC = list(TARGETS)[:11]
# roc and evaluate read a model too; predict and synthesize take no spec: they know the
# ledger by the key beside it, and their own inputs, not the spec's files
OTHERS = {"roc": [*WITH_SPEC, "model"], "evaluate": [*WITH_SPEC, "model"],
          "predict": ["ledger", "key", "lock", "ledger via a symlink", "data, same path",
                       "data, another spelling", "data, a symlink", "data, a hard link",
                       "model"],
           "synthesize": ["ledger", "key", "lock", "ledger via a symlink",
                          "synopsis grid.json", "synopsis cells"]}


def _command(name: str, root: Path, out: str) -> list[object]:
    data, spec, o = root / "toy.parquet", root / "spec.yaml", f"{root}/{out}"
    common = ["--spec", spec, "--out", o]
    return {
        "tabulate": ["tabulate", data, *common, "--epsilon", 0.1],
        "select-features": ["select-features", data, *common, "--score", "tc", "--method",
                            "topk", "--k", 1, "--epsilon", 0.1],
        "publish-grid": ["publish-grid", data, *common, "--epsilon", 0.1],
        "train-nb": ["train-nb", data, *common, "--epsilon", 0.1],
        "train-brc": ["train-brc", data, *common, "--epsilon", 0.1],
        "validate": ["validate", data, *common, "--epsilon", 0.1],
        "roc": ["roc", data, *common, "--model", root / "nb.json", "--epsilon", 0.1],
        "evaluate": ["evaluate", data, *common, "--model", root / "nb.json", "--epsilon", 0.1],
        "predict": ["predict", root / "nb.json", data, "--out", o],
        "synthesize": ["synthesize", root / "syn", "--out", o, "--rows", 10],
    }[name]


def _state(root: Path) -> dict[str, object]:
    """Every file's bytes and kind (link or not) below ``root``."""
    state: dict[str, object] = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            state[str(path)] = ("link", os.readlink(path))
        elif path.is_file():
            state[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return state


COMMANDS = ["tabulate", "select-features", "publish-grid", "train-nb", "train-brc", "validate",
            "roc", "evaluate", "predict", "synthesize"]


@pytest.mark.parametrize("command", COMMANDS)
def test_out_onto_a_protected_file_is_refused_before_the_charge(root: Path,
                                                                command: str) -> None:
    before = _state(root)
    for target in OTHERS.get(command, WITH_SPEC):
        code, err = _run(*_command(command, root, TARGETS[target]))
        assert code == 64, (target, err)
        # a folder output (roc, publish-grid) onto a file is refused as "a file" or "not a
        # folder"; every other as what it would replace
        assert any(w in err for w in ("nothing was charged", "folder", "is a file")), \
            (target, err)
        assert _state(root) == before, target  # ledger, target, links: all untouched


@pytest.mark.parametrize("command", ["roc", "publish-grid"])
def test_a_folder_output_whose_file_is_protected_is_refused(root: Path, command: str) -> None:
    """roc --out DIR writes DIR/curve.*, publish-grid DIR/grid.json: each file is checked."""
    folder = root / f"{command}-out"
    folder.mkdir()
    name = "curve.json" if command == "roc" else "grid.json"
    (folder / name).symlink_to(root / "ledger.jsonl")
    try:
        before = _state(root)
        code, err = _run(*_command(command, root, folder.name))
        assert code == 64 and "ledger" in err, err
        assert _state(root) == before
    finally:
        (folder / name).unlink()


def test_an_output_inside_an_input_folder_is_refused(root: Path, tmp_path: Path) -> None:
    """A Parquet folder is the input: a file (or a temp file) written there would join it."""
    folder = tmp_path / "parts"
    folder.mkdir()
    (folder / "a.parquet").write_bytes((root / "toy.parquet").read_bytes())
    before = _state(root), _state(folder)
    code, err = _run("tabulate", folder, "--spec", root / "spec.yaml", "--out",
                     folder / "counts.csv", "--epsilon", 0.1)
    assert code == 64 and "inside" in err, err
    assert (_state(root), _state(folder)) == before


def test_an_ordinary_output_still_works(root: Path, tmp_path: Path) -> None:
    code, err = _run("predict", root / "nb.json", root / "toy.parquet", "--out",
                     tmp_path / "p.csv")
    assert code == 0, err
    assert (tmp_path / "p.csv").stat().st_size > 0


@pytest.mark.parametrize("command", ["roc", "publish-grid"])
def test_a_folder_output_where_a_ledger_file_belongs_is_refused(project, cli, tmp_path: Path,
                                                                command: str) -> None:
    """A folder named like the (not yet created) lock file would make the ledger unusable."""
    r = cli("train-nb", project.data, "--spec", project.spec, "--out", tmp_path / "nb.json",
            "--epsilon", 0.2, "-q")
    assert r.exit_code == 0, r.stderr
    from dpcli.ledger import companion_paths

    lock = project.ledger.with_name(project.ledger.name + ".lock")
    lock.unlink(missing_ok=True)  # as before the first run: no lock file yet
    ledger = project.ledger.read_bytes()
    absent = [p for p in companion_paths(project.ledger) if not p.exists()]
    assert absent
    for target in absent:
        args = (["roc", project.data, "--model", tmp_path / "nb.json"] if command == "roc"
                else ["publish-grid", project.data])
        r = cli(*args, "--spec", project.spec, "--out", target, "--epsilon", 0.1)
        assert r.exit_code == 64 and "nothing was charged" in r.stderr, r.stderr
        assert not target.exists()
    assert project.ledger.read_bytes() == ledger


@pytest.mark.parametrize("command", COMMANDS)
def test_an_output_that_is_a_fifo_or_links_to_one_is_refused(root: Path, tmp_path: Path,
                                                             command: str) -> None:
    """Renaming over a device or FIFO would replace the node itself with the release (as root,
    ``--out /dev/null`` breaks the system's /dev/null): refused before the charge. A FIFO
    stands for any special file (making a device node needs root)."""
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    link = tmp_path / "link.csv"
    link.symlink_to(fifo)
    folder_output = command in ("roc", "publish-grid")
    for target in (fifo, link):
        before = _state(root)
        code, err = _run(*_fifo_command(command, root, target))
        assert code == 64, (target, err)
        assert ("folder" in err) if folder_output else ("FIFO" in err), err
        assert _state(root) == before
        assert fifo.exists() and not fifo.is_file() and link.is_symlink()


def _fifo_command(name: str, root: Path, out: Path) -> list[object]:
    args = _command(name, root, "placeholder")
    return [str(out) if str(a).endswith("/placeholder") else a for a in args]
