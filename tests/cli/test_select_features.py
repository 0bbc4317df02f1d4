"""End-to-end: ``dpcli select-features`` through the real entry point, and trainers using it.

The toy project (tests/cli/conftest.py): age numeric [17, 90], color
categorical, member binary, words tokens over alpha..omega (max_per_row 3),
label classes [0, 1] with positive 1; total budget ε = 1, ledger empty.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.cli.conftest import Project
from tests.cli.conftest import run_entries as read_entries  # runs only, no genesis


def _select(cli, project: Project, *extra: object, out: str = "f.json", data=None,
            allow_noise: bool = True):
    """select-features on the toy data; with --allow-noise by default: at n = 400 most of
    these small-ε runs would otherwise be refused by the noise check (tested on its own
    below), and these tests are about the mechanics, not about the refusal."""
    noise = ("--allow-noise",) if allow_noise else ()
    return cli("select-features", data or project.data, "--spec", project.spec,
               "--out", project.root / out, *noise, *extra)


def _spent(project: Project) -> float:
    return sum(e["epsilon"] for e in read_entries(project.ledger) if e["kind"] == "reserve")


def test_topk_writes_selection_envelope_and_ledger(project: Project, cli) -> None:
    r = _select(cli, project, "--score", "tc", "--method", "topk", "--k", 2,
                "--epsilon", 0.2, "--seed", 3, "--json")
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["command"] == "select-features" and summary["selected"] == 2
    # candidates: 5 words + the binary column
    assert summary["candidates"] == 6
    env = json.loads((project.root / "f.json").read_text())
    assert env["kind"] == "feature_selection" and env["epsilon"] == 0.2
    assert env["neighbouring"] == "replace-one" and env["seeded"] is True
    p = env["payload"]
    assert p["score"] == "tc" and p["method"] == "topk" and p["parameters"]["k"] == 2
    assert p["sensitivity"] == {"per_feature": 1.0, "l1": 8.0}  # s = 3 words + 1 binary
    assert len(p["selected"]) == 2 and p["n_selected"] == 2
    for entry in p["selected"]:
        assert entry["column"] in ("words", "member")
        if entry["column"] == "words":
            assert entry["word"] in ("alpha", "beta", "gamma", "delta", "omega")
    assert "score" not in json.dumps(p["selected"])  # only which, never how much
    entries = read_entries(project.ledger)
    assert [e["kind"] for e in entries] == ["reserve", "complete"]
    assert entries[0]["command"] == "select-features"
    assert entries[0]["epsilon"] == 0.2
    assert entries[1]["summary"]["selected"] == 2


def test_huge_epsilon_finds_the_true_top_words(project: Project, cli) -> None:
    """At ε = 1e5 the noise is negligible: top-2 by total count is the exact top-2."""
    project.write_spec(lambda s: s["budget"].update(epsilon=1e6))
    r = _select(cli, project, "--score", "tc", "--method", "topk", "--k", 2,
                "--columns", "words", "--epsilon", 1e5, "--seed", 1)
    assert r.exit_code == 0, r.stderr
    frame = pd.read_parquet(project.data)
    # the toy rows hold at most 5 words, capped at 3: counts are after the cap, so only
    # compare against words whose uncapped lead is large
    counts = frame["words"].explode().value_counts()
    chosen = [e["word"] for e in json.loads((project.root / "f.json").read_text())
              ["payload"]["selected"]]
    assert len(chosen) == 2 and set(chosen) <= set(counts.index)
    assert counts[chosen].min() >= counts.drop("zzz", errors="ignore").sort_values().iloc[1]


@pytest.mark.parametrize("args", [
    ["--score", "dc", "--method", "threshold", "--threshold", 5, "--k", 3],
    ["--score", "pi", "--method", "perturb", "--k", 2],
    ["--score", "ig", "--method", "topk", "--k", 1],
    ["--score", "tc", "--method", "cluster", "--threshold", 10],
    ["--score", "chi2", "--method", "topk", "--k", 2],
    ["--score", "chi2", "--method", "perturb", "--threshold", 1.0],
])
def test_every_score_and_method_runs(project: Project, cli, args) -> None:
    r = _select(cli, project, *args, "--epsilon", 0.1, "--seed", 2)
    assert r.exit_code == 0, r.stderr
    p = json.loads((project.root / "f.json").read_text())["payload"]
    assert p["score"] == args[1] and p["method"] == args[3]
    names = {"age", "color", "member", "words"}
    assert all(e["column"] in names for e in p["selected"])
    assert _spent(project) == pytest.approx(0.1)


def test_chi2_candidates_are_whole_columns(project: Project, cli) -> None:
    r = _select(cli, project, "--score", "chi2", "--method", "topk", "--k", 3,
                "--columns", "age,color,member", "--epsilon", 0.3, "--seed", 4, "--json")
    assert r.exit_code == 0, r.stderr
    p = json.loads((project.root / "f.json").read_text())["payload"]
    assert p["candidates"] == 3 and sorted(p["columns"]) == ["age", "color", "member"]
    assert p["sensitivity"]["per_feature"] == 4.0


@pytest.mark.parametrize("args, needle", [
    (["--method", "topk"], "needs --k"),
    (["--method", "threshold", "--threshold", 3], "--k"),
    (["--method", "cluster", "--score", "pi", "--threshold", 3], "cluster"),
    (["--method", "magic", "--k", 2], "method"),
    (["--score", "tc", "--columns", "color", "--k", 2, "--method", "topk"], "color"),
    (["--columns", "nope", "--k", 2, "--method", "topk"], "nope"),
])
def test_bad_options_are_refused_and_charge_nothing(project: Project, cli, args, needle) -> None:
    r = _select(cli, project, *args, "--epsilon", 0.1)
    assert r.exit_code == 64
    assert needle in r.stderr
    assert _spent(project) == 0
    assert not (project.root / "f.json").exists()


def test_missing_section_and_epsilon_names_the_key(project: Project, cli) -> None:
    r = _select(cli, project, "--method", "topk", "--k", 2)
    assert r.exit_code == 78 and "select-features" in r.stderr
    assert _spent(project) == 0


def test_spec_section_is_used_and_validated(project: Project, cli) -> None:
    project.write_spec(lambda s: s.update({"select-features": {
        "epsilon": 0.25, "score": "dc", "method": "threshold", "threshold": 2, "k": 4, "r": 2}}))
    r = _select(cli, project, "--seed", 5)
    assert r.exit_code == 0, r.stderr
    p = json.loads((project.root / "f.json").read_text())["payload"]
    assert p["score"] == "dc" and p["parameters"] == {"threshold": 2.0, "k": 4, "r": 2}
    assert p["row_cap"] == 3  # r = 2 words + 1 binary column
    # the command line overrides the method; the spec's threshold is not used by topk
    r = _select(cli, project, "--method", "topk", "--k", 1, "--out", project.root / "g.json")
    assert r.exit_code == 0, r.stderr
    g = json.loads((project.root / "g.json").read_text())["payload"]
    assert g["method"] == "topk" and "threshold" not in g["parameters"]

    project.write_spec(lambda s: s.update({"select-features": {"epsilon": 0.2, "k": 0}}))
    r = _select(cli, project, out="h.json")
    assert r.exit_code == 78 and "select-features.k" in r.stderr


def test_dry_run_shows_plan_and_charges_nothing(project: Project, cli) -> None:
    r = cli("select-features", project.data, "--spec", project.spec, "--method", "threshold",
            "--threshold", 3, "--k", 2, "--epsilon", 0.4, "--dry-run", "--json",
            "--allow-noise")
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["dry_run"] is True and summary["fits"] is True
    assert summary["breakdown"][0]["mechanism"] == "sparse_vector"
    assert read_entries(project.ledger) == []


def test_over_budget_exits_3(project: Project, cli) -> None:
    r = _select(cli, project, "--method", "topk", "--k", 1, "--epsilon", 5)
    assert r.exit_code == 3
    assert _spent(project) == 0 and not (project.root / "f.json").exists()


def test_train_nb_uses_the_selection_and_predict_follows(project: Project, cli) -> None:
    r = _select(cli, project, "--score", "tc", "--method", "topk", "--k", 2, "--columns", "words",
                "--epsilon", 0.2, "--seed", 6)
    assert r.exit_code == 0, r.stderr
    chosen = [e["word"] for e in json.loads((project.root / "f.json").read_text())
              ["payload"]["selected"]]
    r = cli("train-nb", project.data, "--spec", project.spec, "--features",
            project.root / "f.json", "--out", project.root / "m.json", "--epsilon", 0.5,
            "--seed", 7, "--r", 1)
    assert r.exit_code == 0, r.stderr
    model = json.loads((project.root / "m.json").read_text())["payload"]
    assert model["columns"] == ["words"]
    vocab = model["schema"]["columns"]["words"]["vocabulary"]
    assert sorted(vocab) == sorted(chosen) and len(model["tables"]["words"][0]) == 2
    assert model["schema"]["columns"]["words"]["max_per_row"] == 1
    entries = read_entries(project.ledger)
    nb = next(e for e in entries if e["kind"] == "reserve" and e["command"] == "train-nb")
    assert nb["arguments"]["features"].endswith("f.json") and nb["arguments"]["r"] == 1
    assert _spent(project) == pytest.approx(0.7)

    r = cli("predict", project.root / "m.json", project.data, "--out", project.root / "p.csv")
    assert r.exit_code == 0, r.stderr
    assert len(pd.read_csv(project.root / "p.csv")) == len(pd.read_parquet(project.data))


def test_train_nb_refuses_bad_selection_files(project: Project, cli) -> None:
    def train(path, *extra):
        return cli("train-nb", project.data, "--spec", project.spec, "--features", path,
                   "--out", project.root / "m.json", "--epsilon", 0.5, *extra)

    r = train(project.root / "missing.json")
    assert r.exit_code == 66 and "missing.json" in r.stderr
    assert _select(cli, project, "--method", "topk", "--k", 2, "--epsilon", 0.1).exit_code == 0
    spent = _spent(project)
    r = train(project.root / "f.json", "--columns", "age")
    assert r.exit_code == 64 and "--features" in r.stderr
    env = json.loads((project.root / "f.json").read_text())
    env["payload"]["selected"] = [{"column": "words", "word": "notaword"}]
    (project.root / "bad.json").write_text(json.dumps(env))
    r = train(project.root / "bad.json")
    assert r.exit_code == 65 and "notaword" in r.stderr and "bad.json" in r.stderr
    env["payload"]["selected"] = []
    (project.root / "empty.json").write_text(json.dumps(env))
    r = train(project.root / "empty.json")
    assert r.exit_code == 65 and "selects no features" in r.stderr
    assert _spent(project) == spent  # refused before the charge
    assert not (project.root / "m.json").exists()


# ------------------------------------------------- noise check, released check, split rule
def _big(project: Project, n: int = 4000) -> None:
    """The toy data repeated to n rows, a large budget: a selection the check lets through."""
    frame = pd.read_parquet(project.data)
    pd.concat([frame] * (n // len(frame)), ignore_index=True).to_parquet(project.data)
    project.write_spec(lambda s: s["budget"].update(epsilon=100.0))


def test_noise_check_refuses_before_any_charge(project: Project, cli) -> None:
    """n = 400, topk k = 2 at ε = 0.2: the noise (gap ≈ 44 rows) exceeds 5 % of n (20)."""
    r = _select(cli, project, "--score", "tc", "--method", "topk", "--k", 2,
                "--epsilon", 0.2, "--seed", 3, allow_noise=False)
    assert r.exit_code == 64
    assert "refused before any charge" in r.stderr and "would select by noise" in r.stderr
    assert "ε ≥ 0.439" in r.stderr and "--allow-noise" in r.stderr  # what would suffice
    assert read_entries(project.ledger) == [] and not (project.root / "f.json").exists()
    # the dry run says the same, and charges nothing either
    r = _select(cli, project, "--score", "tc", "--method", "topk", "--k", 2,
                "--epsilon", 0.2, "--dry-run", allow_noise=False)
    assert r.exit_code == 64 and "would select by noise" in r.stderr
    assert read_entries(project.ledger) == []
    # at the ε it names, the same run passes
    r = _select(cli, project, "--score", "tc", "--method", "topk", "--k", 2,
                "--epsilon", 0.45, "--seed", 3, allow_noise=False)
    assert r.exit_code == 0, r.stderr
    assert _spent(project) == pytest.approx(0.45)


def test_allow_noise_runs_and_records_the_failed_check(project: Project, cli) -> None:
    r = _select(cli, project, "--score", "tc", "--method", "topk", "--k", 2,
                "--epsilon", 0.2, "--seed", 3, "--json")
    assert r.exit_code == 0, r.stderr
    assert "warning: --allow-noise" in r.stderr and "selecting anyway" in r.stderr
    payload = project.envelope("f.json")["payload"]
    assert payload["noise_check"]["passes"] is False
    assert payload["noise_check"]["allowed"] is True
    assert payload["noise_check"]["resolution"] > payload["noise_check"]["gap"] == 20.0
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["noise_check"]["passes"] is False
    assert _spent(project) == pytest.approx(0.2)
    # the spec's allow_noise: true does the same
    project.write_spec(lambda s: s.update({"select-features": {
        "epsilon": 0.2, "score": "tc", "method": "topk", "k": 2, "allow_noise": True}}))
    r = _select(cli, project, "--seed", 3, out="g.json", allow_noise=False)
    assert r.exit_code == 0, r.stderr
    assert project.envelope("g.json")["payload"]["noise_check"]["allowed"] is True


def test_spec_min_effect_and_allow_noise_are_validated(project: Project, cli) -> None:
    project.write_spec(lambda s: s.update({"select-features": {
        "epsilon": 0.2, "method": "topk", "k": 2, "allow_noise": "yes"}}))
    r = _select(cli, project, allow_noise=False)
    assert r.exit_code == 78 and "select-features.allow_noise" in r.stderr
    project.write_spec(lambda s: s.update({"select-features": {
        "epsilon": 0.2, "method": "topk", "k": 2, "min_effect": -1}}))
    r = _select(cli, project, allow_noise=False)
    assert r.exit_code == 78 and "select-features.min_effect" in r.stderr
    assert read_entries(project.ledger) == []


def test_min_effect_moves_the_verdict(project: Project, cli) -> None:
    """A coarser meaningful gap (0.2 of n = 80 rows) lets the same run through."""
    r = _select(cli, project, "--score", "tc", "--method", "topk", "--k", 2,
                "--epsilon", 0.2, "--seed", 3, "--min-effect", 0.2, allow_noise=False)
    assert r.exit_code == 0, r.stderr
    assert project.envelope("f.json")["payload"]["noise_check"]["gap"] == pytest.approx(80.0)


def test_total_epsilon_takes_the_rule_share_and_prints_the_training_share(
        project: Project, cli) -> None:
    _big(project)
    r = _select(cli, project, "--score", "tc", "--method", "perturb", "--k", 3,
                "--total-epsilon", 1.0, "--dry-run", "--json", allow_noise=False)
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    split = summary["split"]
    assert split["selection"] + split["training"] == pytest.approx(1.0)
    assert 0.1 <= split["selection"] <= 0.5
    assert summary["planned"]["epsilon"] == pytest.approx(split["selection"])
    assert f"--epsilon {split['training']:g}" in r.stderr
    assert read_entries(project.ledger) == []
    r = _select(cli, project, "--score", "tc", "--method", "perturb", "--k", 3,
                "--total-epsilon", 1.0, "--seed", 1, allow_noise=False)
    assert r.exit_code == 0, r.stderr
    assert _spent(project) == pytest.approx(split["selection"])
    payload = project.envelope("f.json")["payload"]
    assert payload["split"]["training"] == split["training"]
    assert payload["noise_check"]["passes"] is True
    # perturb: the released check ran (its verdict on 6 toy candidates varies with the noise)
    verdict = payload["degeneracy"]
    assert verdict["degenerate"] == (verdict["margin"] <= verdict["null_margin_p99"])
    r = _select(cli, project, "--epsilon", 0.2, "--total-epsilon", 1.0, allow_noise=False)
    assert r.exit_code == 64 and "not both" in r.stderr
    # a total whose half cannot resolve min_effect: refused, naming the total that would
    r = _select(cli, project, "--score", "tc", "--method", "topk", "--k", 3,
                "--total-epsilon", 0.05, allow_noise=False)
    assert r.exit_code == 64 and "would select by noise" in r.stderr
    assert "a total ≥" in r.stderr and _spent(project) == pytest.approx(split["selection"])


def test_released_check_flags_a_selection_by_noise(project: Project, cli) -> None:
    """perturb at ε = 0.001 on n = 400: the noisy scores are noise (scale 8,000 against
    counts ≤ 400); allowed, then flagged. The seeded noise is keyed by each project's ledger
    key, so the verdict is random: a pure-noise run passes the 99th-percentile null about 1 %
    of the time; of 3 runs at least one is flagged except with probability ≈ 1e-6, and every
    flagged run says so on stderr and in the file."""
    flagged = 0
    for seed in (5, 6, 7):
        out = f"f{seed}.json"
        r = _select(cli, project, "--score", "tc", "--method", "perturb", "--k", 2,
                    "--epsilon", 0.001, "--seed", seed, out=out)
        assert r.exit_code == 0, r.stderr
        verdict = project.envelope(out)["payload"]["degeneracy"]
        assert verdict["degenerate"] == ("selection indistinguishable from noise" in r.stderr)
        flagged += verdict["degenerate"]
    assert flagged >= 1


def test_no_options_on_an_all_numeric_table_picks_fitting_defaults(tmp_path: Path, cli) -> None:
    """Issue 24: with no --score/--method/--threshold/--k, an all-numeric schema runs chi2
    with topk (k = half the columns), saying so, instead of asking for tokens or τ."""
    import numpy as np
    import yaml

    from tests.cli.conftest import sync_ledger

    rng = np.random.default_rng(3)
    n = 20_000
    label = rng.integers(0, 2, n)
    frame = pd.DataFrame({"x1": np.clip(label * 4 + rng.normal(3, 1, n), 0, 10),
                          **{f"x{i}": rng.uniform(0, 10, n) for i in range(2, 5)},
                          "label": label})
    data = tmp_path / "num.parquet"
    frame.to_parquet(data, index=False)
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "dataset": "num", "budget": {"epsilon": 5.0}, "ledger": "ledger.jsonl",
        "label": {"column": "label", "classes": [0, 1], "positive": 1},
        "schema": {"columns": {f"x{i}": {"type": "numeric", "bounds": [0, 10]}
                              for i in range(1, 5)}}}))
    sync_ledger(spec)
    out = tmp_path / "sel.json"
    r = cli("select-features", data, "--spec", spec, "--epsilon", 2, "--out", out,
            "--seed", 1)
    assert r.exit_code == 0, r.stderr
    assert "default: score chi2" in r.stderr and "method topk with k = 2" in r.stderr
    payload = json.loads(out.read_text())["payload"]
    assert len(payload["selected"]) == 2 and "x1" in json.dumps(payload["selected"])
