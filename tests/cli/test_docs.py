"""Every command has help with an example, and the README documents it."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

COMMANDS = [["init"], ["schema", "suggest"], ["inspect"], ["tabulate"], ["select-features"],
            ["train-nb"], ["train-brc"], ["validate"], ["predict"],
            ["roc"], ["evaluate"], ["publish-grid"], ["synthesize"], ["show"], ["plan"],
            ["ledger", "init"],
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
                     "show", "plan", "ledger", "schema"}


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


# --- The documentation runs as written and stands alone -------------------------------------
#
# Every ```sh-fenced `dpcli` command of README.md and of the docs pages (docs/*.md,
# docs/algorithms/*.md), and every example in every command's --help, runs as written from a
# fresh copy of the shipped configs/ and sample_data/, each dataset with a fresh ledger. An
# example expected to fail says so in its comment ("# exit 64: ..."). Nothing is run with
# --dry-run that is not written so: on the 3,000-row samples every example takes about a
# second. Make and cron blocks are patterns with placeholders (`$<`, `data/today.parquet`) and
# are not run; their dpcli line is the README's tabulate --reuse example.

REPO = Path(__file__).parents[2]
SHIPPED = ("configs", "sample_data")
EXPECT_EXIT = re.compile(r"#\s*exit (\d+):")
FILL_MARKER = re.compile(r"<!--\s*docs-test:\s*fill\s+(\S+)")
#: `<!-- docs-test: skip REASON -->` before a ```sh fence: the block is not run (it needs what a
#: test cannot have: a Spark cluster, Java, sudo). The reason is required and reported.
SKIP_MARKER = re.compile(r"<!--\s*docs-test:\s*skip\s+(.*?)\s*-->")
#: `<!-- docs-test: budget SPEC EPSILON -->`: the hand edit a page asks for after
#: `ledger raise` (declare the raised total under `budget:` in the spec).
BUDGET_MARKER = re.compile(r"<!--\s*docs-test:\s*budget\s+(\S+)\s+(\S+)\s*-->")
#: Pages other work of issue 24 writes (exit codes, the Python API): links to them are checked
#: once they are in the tree.
PENDING_PAGES = {REPO / "docs" / "exit-codes.md", REPO / "docs" / "api.md"}


def _join_continuations(lines: list[str]) -> list[str]:
    out: list[str] = []
    buf = ""
    for line in lines:
        stripped = line.strip()
        if stripped.endswith("\\"):
            buf += stripped[:-1] + " "
            continue
        out.append(buf + stripped)
        buf = ""
    return out


def readme_steps(text: str) -> list[tuple[str, str]]:
    """A page's runnable steps in order: ("run", command line), ("fill", spec path),
    ("budget", "SPEC EPSILON") or ("skip", reason) for a ```sh block marked not to run.
    Only ```sh fences run: ```text, ```yaml, ```make, ```cron and ```python blocks are
    shown, not run."""
    steps: list[tuple[str, str]] = []
    fence: str | None = None                    # the open fence's language
    block: list[str] = []
    skip = ""
    for line in text.splitlines():
        if fence is None:
            if line.startswith("```"):
                fence, block = line[3:].strip(), []
            elif m := FILL_MARKER.search(line):
                steps.append(("fill", m.group(1)))
            elif m := SKIP_MARKER.search(line):
                skip = m.group(1)
            elif m := BUDGET_MARKER.search(line):
                steps.append(("budget", f"{m.group(1)} {m.group(2)}"))
            continue
        if line.startswith("```"):
            if fence == "sh" and skip:
                steps.append(("skip", skip))
            elif fence == "sh":
                steps += [("run", c) for c in _join_continuations(block)
                          if c.startswith("dpcli ")]
            fence, skip = None, ""
        else:
            block.append(line)
    return steps


def help_examples(command: list[str]) -> list[str]:
    """The `dpcli` lines after "Example" in the command's docstring (what --help shows)."""
    from dpcli.cli.app import app

    group = app
    for name in command[:-1]:
        group = next(g.typer_instance for g in group.registered_groups if g.name == name)
    callback = next(c.callback for c in group.registered_commands if c.name == command[-1])
    doc = callback.__doc__ or ""
    body = doc[doc.index("Example"):]
    return [c for c in _join_continuations(body.splitlines()) if c.startswith("dpcli ")]


def fill_own_spec(path: Path) -> None:
    """The hand edits the README asks for after `dpcli init`: a budget with a δ, the classes."""
    text = path.read_text()
    for old, new in ((r"(\n  epsilon:) TODO", r"\1 2.0 "), (r"(\n  delta:) 0\.0", r"\1 1e-5"),
                     (r"(\n  classes:) TODO", r"\1 [0, 1]"), (r"(\n  positive:) TODO", r"\1 1")):
        text, n = re.subn(old, new, text, count=1)
        assert n == 1, f"{path}: no {old!r} to fill; has `dpcli init`'s output changed?"
    path.write_text(text)


class Workspace:
    """A fresh copy of the shipped files; runs examples through the real CLI, in order."""

    def __init__(self, root: Path, cli) -> None:
        for name in SHIPPED:
            shutil.copytree(REPO / name, root / name)
        self.root, self.cli = root, cli
        self.ledgers: set[str] = set()
        self.ran = 0
        self.head = ""          # the last ledger head a command printed, for `<hash>`

    def declare_budget(self, spec: str, epsilon: str) -> None:
        """The edit a page asks for after `ledger raise`: the new total under `budget:`."""
        path = self.root / spec
        text, n = re.subn(r"(\nbudget:\s*\n\s+epsilon:)\s*[\d.]+", rf"\g<1> {epsilon}",
                          path.read_text(), count=1)
        assert n == 1, f"{spec}: no budget epsilon to declare"
        path.write_text(text)

    def run(self, line: str, where: str) -> None:
        expected = int(m.group(1)) if (m := EXPECT_EXIT.search(line)) else 0
        args = shlex.split(line, comments=True)
        if "<hash>" in args:    # `ledger verify --expect-head <hash>`: the head printed before
            assert self.head, f"{where}: `{line}` needs a head printed by an earlier example"
            args = [self.head if a == "<hash>" else a for a in args]
        if "&&" in args:                        # `dpcli ledger verify ... && echo intact`
            args = args[:args.index("&&")]
        args = args[1:]
        spec = args[args.index("--spec") + 1] if "--spec" in args else None
        if args[:2] == ["ledger", "init"]:
            self.ledgers.add(spec)
        elif spec is not None and spec not in self.ledgers and not re.search(
                r"\n  epsilon: TODO", (self.root / spec).read_text()):
            # a fresh ledger for this dataset: the genesis `ledger init` records, once
            setup = self.cli("ledger", "init", "--spec", spec)
            assert setup.exit_code == 0, setup.stderr
            self.ledgers.add(spec)
        r = self.cli(*args)
        assert r.exit_code == expected, (
            f"{where}: `{line}` exited {r.exit_code}, expected {expected}\n{r.stderr[-2000:]}")
        if m := re.search(r"\bhead ([0-9a-f]{64})\b", r.stdout + r.stderr):
            self.head = m.group(1)
        self.ran += 1

    def steps(self, steps: list[tuple[str, str]], where: str) -> list[str]:
        """Run a page's steps in order; returns the reasons of the blocks it skipped."""
        skipped = []
        for kind, value in steps:
            if kind == "fill":
                fill_own_spec(self.root / value)
            elif kind == "budget":
                self.declare_budget(*value.split())
            elif kind == "skip":
                skipped.append(value)
            else:
                self.run(value, where)
        return skipped


def test_readme_examples_run_as_written(cli, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    ws = Workspace(tmp_path, cli)
    steps = readme_steps(README)
    assert not ws.steps(steps, "README.md"), "the README skips no example"
    print(f"README.md: {ws.ran} dpcli examples run")
    assert ws.ran >= 15 and ws.ran == sum(kind == "run" for kind, _ in steps)


#: The docs pages whose ```sh examples run, each page in a fresh workspace (its examples are
#: read top to bottom, each page self-contained). docs/commands/ is not among them: its
#: examples are the --help examples, run by test_help_examples_run_as_written. docs/api.md's
#: examples are Python (```python), shown, not run here.
DOC_PAGES = sorted([*(REPO / "docs").glob("*.md"), *(REPO / "docs" / "algorithms").glob("*.md")])


@pytest.mark.parametrize("page", DOC_PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_docs_examples_run_as_written(cli, tmp_path, monkeypatch, page: Path) -> None:
    """Every ```sh `dpcli` line of a docs page runs as written against the shipped configs and
    samples; a block that cannot run here carries a skip marker with its reason."""
    monkeypatch.chdir(tmp_path)
    ws = Workspace(tmp_path, cli)
    steps = readme_steps(page.read_text())
    skipped = ws.steps(steps, str(page.relative_to(REPO)))
    print(f"{page.relative_to(REPO)}: {ws.ran} dpcli examples run, {len(skipped)} blocks "
          f"skipped {skipped}")
    assert ws.ran == sum(kind == "run" for kind, _ in steps)
    assert all(reason.strip() for reason in skipped)


HELP_ORDER = [["ledger", "init"], ["init"], ["schema", "suggest"], ["inspect"], ["tabulate"],
              ["select-features"], ["train-nb"], ["train-brc"], ["validate"], ["predict"],
              ["roc"], ["evaluate"], ["show"], ["publish-grid"], ["synthesize"],
              ["plan"], ["ledger", "show"],
              ["ledger", "verify"], ["ledger", "raise"], ["ledger", "repair"]]


def test_help_examples_run_as_written(cli, tmp_path, monkeypatch) -> None:
    """In one workspace, in an order where each example's inputs were made by an earlier one
    (predict's model by train-nb's example, synthesize's synopsis by publish-grid's)."""
    assert sorted(map(tuple, HELP_ORDER)) == sorted(map(tuple, COMMANDS))
    monkeypatch.chdir(tmp_path)
    ws = Workspace(tmp_path, cli)
    for command in HELP_ORDER:
        examples = help_examples(command)
        assert examples, f"dpcli {' '.join(command)} --help has no runnable example"
        for line in examples:
            if line.startswith("dpcli schema suggest"):
                fill_own_spec(tmp_path / "mine" / "credit.yaml")   # as its example says
            ws.run(line, f"dpcli {' '.join(command)} --help")
    print(f"--help: {ws.ran} dpcli examples run")
    assert ws.ran >= len(COMMANDS)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _outside_fences(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


DOC_FILES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


@pytest.mark.parametrize("page", DOC_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page: Path) -> None:
    text = _outside_fences(page.read_text())
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):           # http:, https:, mailto: are not checked
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            if file not in PENDING_PAGES:
                broken.append(target)
            continue
        assert REPO.resolve() in [file, *file.parents], f"{page}: {target} leaves the repository"
        if anchor and file.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", _outside_fences(file.read_text()), flags=re.M)
            if anchor not in {_slug(h) for h in headings}:
                broken.append(target)
    assert not broken, f"{page.relative_to(REPO)}: broken links {broken}"


def test_docs_stand_alone() -> None:
    """No pointer to files outside the repository (the old shared design notes, style guide
    or data README): the repository's own pages are docs/design.md and docs/datasets.md."""
    outside = re.compile(r"\.\./shared|DESIGN\.md|STYLE\.md|(?<!sample_)data/README")
    files = [*DOC_FILES, *(REPO / "configs").glob("*.yaml"), *(REPO / "dpcli").rglob("*.py"),
             REPO / "sample_data" / "README.md"]
    hits = [f"{f.relative_to(REPO)}:{i}" for f in files
            for i, line in enumerate(f.read_text().splitlines(), 1) if outside.search(line)]
    assert not hits, hits


def test_readme_is_a_usage_document() -> None:
    assert len(README.splitlines()) <= 250
    assert "make demo" in README and "make test" in README


def test_make_lint_lints_and_is_part_of_make_test() -> None:
    make = (REPO / "Makefile").read_text()
    lint = re.search(r"^lint:.*\n((?:\t.*\n)+)", make, flags=re.M)
    assert lint and "ruff check dpcli tests benchmarks" in lint.group(1)
    assert re.search(r"^test:.*\blint\b", make, flags=re.M)


def test_make_typecheck_runs_mypy_and_is_part_of_make_test() -> None:
    make = (REPO / "Makefile").read_text()
    target = re.search(r"^typecheck:.*\n((?:\t.*\n)+)", make, flags=re.M)
    assert target and "mypy" in target.group(1)
    assert re.search(r"^test:.*\btypecheck\b", make, flags=re.M)
    config = (REPO / "pyproject.toml").read_text()
    assert "[tool.mypy]" in config and re.search(r'"mypy==[\d.]+"', config)


def test_pre_commit_pins_the_same_ruff() -> None:
    pinned = re.search(r'"ruff==([\d.]+)"', (REPO / "pyproject.toml").read_text())
    hook = re.search(r"ruff-pre-commit\n\s+rev: v([\d.]+)",
                     (REPO / ".pre-commit-config.yaml").read_text())
    assert pinned and hook and pinned.group(1) == hook.group(1)


def test_shell_completion_is_on(cli) -> None:
    """`dpcli --install-completion` exists, and completing through the real entry point works."""
    import os
    import subprocess
    import sys

    assert "--install-completion" in cli("--help").stdout
    env = {**os.environ, "_DPCLI_COMPLETE": "complete_bash", "COMP_WORDS": "dpcli ledger ",
           "COMP_CWORD": "2"}
    script = Path(sys.executable).with_name("dpcli")     # the installed console script
    if not script.exists():
        pytest.skip("dpcli is not installed as a console script beside this python")
    out = subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert {"init", "show", "verify", "raise", "repair"} <= set(out.stdout.split())


def test_command_pages_are_generated() -> None:
    """docs/commands/ is exactly what `python -m dpcli.docgen docs/commands` writes: one page
    per command of the app, none stale. After a change to a docstring, an option or a spec
    key, regenerate the pages."""
    from dpcli.docgen import pages

    generated = pages()
    folder = REPO / "docs" / "commands"
    committed = {p.name: p.read_text() for p in folder.glob("*.md")}
    regenerate = "run `python -m dpcli.docgen docs/commands` and commit the pages"
    assert set(committed) == set(generated), f"stale or missing pages: {regenerate}"
    stale = [name for name, text in generated.items() if committed[name] != text]
    assert not stale, f"docs/commands/{stale[0]} differs from the generated page: {regenerate}"
    assert len(generated) == len(COMMANDS) + 1          # and index.md


def test_command_pages_hold_every_option_and_spec_key() -> None:
    from dpcli.docgen import pages
    from dpcli.params import SECTIONS

    generated = pages()
    for name, section in SECTIONS.items():
        text = generated[f"{name}.md"]
        for param in section.params:
            assert f"| `{param.key}` |" in text, f"{name}: spec key {param.key} missing"
    assert "| `--epsilon`, `-e` |" in generated["train-nb.md"]
    assert "](../algorithms/naive-bayes.md)" in generated["train-nb.md"]
