"""One input file charged under two dataset ids of one ledger: warned at spend time.

Each dataset id has a budget of its own, so the same people's privacy loss is the sum over
both ids; `ledger init` of the second id warned in general, a run did not. The ledger's
keyed checkpoint keeps each dataset's input digests (64 bits of each), so the look costs
no scan of the file. Through the real entry point."""

from __future__ import annotations

import hashlib
import hmac
import json

from dpcli.ledger import canonical, head_path, read_key
from tests.cli.conftest import Project


def _second_id(project: Project) -> None:
    project.write_spec(lambda spec: spec.update(dataset="toy2"))  # init's the new id too


def _tab(cli, project: Project, data, out: str, *extra: object):
    return cli("tabulate", data, "--spec", project.spec, "--out", project.root / out,
               "--epsilon", 0.3, *extra)


def test_the_same_file_under_a_second_dataset_id_warns(project: Project, cli) -> None:
    assert _tab(cli, project, project.data, "a.csv").exit_code == 0
    _second_id(project)
    r = _tab(cli, project, project.data, "b.csv", "--json", "--quiet")
    assert r.exit_code == 0, r.stderr
    assert "charged before under dataset id 'toy'" in r.stderr
    assert "now under 'toy2'" in r.stderr and "does not add up" in r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert any("dataset id 'toy'" in w for w in out["warnings"])
    # the run itself goes ahead: composition across ids is the custodian's call
    assert [e["dataset"] for e in project.reserves()] == ["toy", "toy2"]


def test_another_file_or_the_same_id_does_not_warn(project: Project, cli) -> None:
    assert _tab(cli, project, project.data, "a.csv").exit_code == 0
    r = _tab(cli, project, project.data, "b.csv")  # the same id again
    assert r.exit_code == 0 and "charged before under dataset id" not in r.stderr
    _second_id(project)
    r = _tab(cli, project, project.csv, "c.csv")  # another file under the new id
    assert r.exit_code == 0 and "charged before under dataset id" not in r.stderr


def test_a_checkpoint_from_before_input_digests_is_rebuilt_and_warns(project: Project,
                                                                     cli) -> None:
    """A checkpoint written by an earlier dpcli has no input digests: the next spend rebuilds
    it from the whole file once (under the lock), so the warning is not lost."""
    assert _tab(cli, project, project.data, "a.csv").exit_code == 0
    _second_id(project)
    head = head_path(project.ledger)
    body = json.loads(head.read_text())
    body.pop("mac")
    assert "toy" in body.pop("inputs")
    body["mac"] = hmac.new(read_key(project.ledger), canonical(body).encode(),
                           hashlib.sha256).hexdigest()
    head.write_text(canonical(body) + "\n")
    r = _tab(cli, project, project.data, "b.csv")
    assert r.exit_code == 0, r.stderr
    assert "charged before under dataset id 'toy'" in r.stderr
    assert "inputs" in json.loads(head.read_text())
    assert cli("ledger", "verify", "--spec", project.spec).exit_code == 0
