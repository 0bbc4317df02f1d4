"""``dpcli init``: a starting spec and schema from a file's structure, never its values."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from dpcli.cli.common import QuietOpt, handle_errors
from dpcli.cli.ui import UI

#: every spending command's section, with a modest ε and what its keys mean (docs/spec.md has more)
SECTIONS = """\
# One section per command: the ε a run spends, and its parameters. A command-line
# --epsilon overrides a section's for one run. Together they must fit in budget.epsilon
# (`dpcli ledger show` keeps the account). Delete the sections you will not use.
tabulate:
  epsilon: 0.5                 # one noisy contingency table per run; name the columns to
                               # cross with `columns: [a, b]` here or --columns a,b
select-features:
  epsilon: 0.2                 # choosing features; the rest of a workflow's ε trains on them
  score: chi2                  # chi2 scores whole columns (any kind)
  method: topk
  k: 5
train-nb:
  epsilon: 1.0                 # naive Bayes: counts, means and variances with noise
  method: global
validate:
  epsilon: 1.0                 # private logistic regression
evaluate:
  epsilon: 0.2                 # a noisy confusion matrix of a model on a (private) test file
roc:
  epsilon: 0.5                 # a private ROC curve and AUC on a (private) test file
"""


@handle_errors
def init(
    data: Annotated[Path, typer.Argument(
        help="The CSV or Parquet file to describe. Only its structure is read: the Parquet "
        "schema, or the CSV header line.", dir_okay=False)],
    label: Annotated[str, typer.Option(help="The label column (the class to predict).")],
    out: Annotated[Path, typer.Option(
        "--out", "-o", help="The spec to write (YAML); its schema goes beside it as "
        "NAME.schema.yaml. Neither may exist.", dir_okay=False)],
    dataset: Annotated[str | None, typer.Option(
        help="The dataset id, the ledger's key for its lifetime budget (default: the file's "
        "name).")] = None,
    quiet: QuietOpt = False,
) -> None:
    """Write a starting spec and schema for a data file, from its structure only.

    Column names and types come from the Parquet schema (its footer) or the
    CSV header line; no value is read, so nothing is spent and nothing
    private reaches the files. Every domain a release depends on — numeric
    bounds, category lists, the label's classes, the lifetime budget — is
    written as TODO with what to fill in and where such facts are usually
    documented (a codebook, a data dictionary, a survey's design), never the
    data. Every command refuses the spec, naming each TODO, until they are
    filled; `dpcli inspect DATA --spec SPEC` lists them.

    Example:

        dpcli init sample_data/credit_train.parquet --label label --out mine/credit.yaml
    """
    from dpcli.data.layout import describe_columns
    from dpcli.errors import UsageError
    from dpcli.io import Outputs

    ui = UI(quiet=quiet)
    columns, rows = describe_columns(data)
    names = [name for name, _ in columns]
    if label not in names:
        raise UsageError(f"--label: {label!r} is not a column of {data} (columns: "
                         f"{', '.join(names[:20])}{' …' if len(names) > 20 else ''})")
    schema_path = out.with_name(f"{out.stem}.schema.yaml")
    for path in (out, schema_path):
        if path.exists():
            raise UsageError(f"{path}: already exists; init never replaces a file (choose "
                             "another --out or remove it)")
    dataset_id = dataset or _dataset_id(data)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", dataset_id):
        raise UsageError(f"--dataset: {dataset_id!r} must be 1-100 letters, digits, '.', '_' "
                         "or '-', starting with a letter or digit")
    features = [(n, kind) for n, kind in columns if n != label]
    outputs = Outputs()
    outputs.check_writable(out, schema_path, protected=[("the data file", data)])
    with outputs:
        outputs.write_text(out, spec_text(data, dataset_id, label, schema_path.name, rows))
        outputs.write_text(schema_path, schema_text(data, features))
        outputs.commit()
    todo = sum(kind not in ("skip", "binary") for _, kind in features)
    ui.say(f"wrote {out} and {schema_path} from the structure of {data} (no value was read): "
           f"{len(features)} columns, {todo} domain(s) and the budget to declare (TODO); "
           f"then `dpcli inspect {data} --spec {out}`")
    if dataset is None:
        # the id keys the ledger's budget: a user who inits train.csv and later test.csv must
        # not find two budgets for one dataset by accident
        ui.say(f"dataset id {dataset_id!r} (from the file's name; it names this data's budget "
               "in the ledger — choose it with --dataset, the same for every file of the data)")


def _dataset_id(data: Path) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", data.stem).strip("-._") or "dataset"
    return stem[:100]


def spec_text(data: Path, dataset: str, label: str, schema_file: str, rows: int | None) -> str:
    """The spec's YAML: budget and classes TODO, ledger beside the configs, default sections."""
    n = f" ({rows:,} rows by the file's metadata; n is public under replace-one)" if rows else ""
    return f"""\
# Spec for {data.name}{n}, written by `dpcli init` from the file's structure only.
# Fill in every TODO from what is documented about the data, never from the data itself;
# until then every command refuses this spec and names what is left.
dataset: {dataset}              # ledger key: one lifetime budget for this dataset id, ever

budget:
  epsilon: TODO                 # the lifetime ε for every release from this dataset (a policy
                                # decision: 1 is strong protection, 10 is weak; releases add up)
  delta: 0.0                    # pure ε-DP; only `dpcli schema suggest` of categories needs
                                # a δ (e.g. 1e-6): declare it here only if you will run it

# The audit log (append-only, hash-chained); relative to this file's folder. Create it once
# with `dpcli ledger init --spec THIS_FILE`, and keep it (with its .key and .head) safe: it is
# the account.
ledger: ../ledgers/{dataset}.jsonl

label:
  column: {_yaml_key(label)}
  classes: TODO                 # every value the label takes, from its documentation, e.g. [0, 1]
  positive: TODO                # the class that scores and ROC curves are about, e.g. 1
  public: false                 # the label is private (protected); 'true' only if it truly is
                                # public knowledge about every record

# Public domains of the feature columns (bounds, categories, vocabularies).
schema: {schema_file}

{SECTIONS}"""


_HOW = {
    "numeric": ("numeric", "bounds: TODO", "[lower, upper] from the codebook or the field's "
                "design (a valid range, a top-code), not the file's min and max"),
    "categorical": ("categorical", "categories: TODO", "every documented code, e.g. [a, b, c]; "
                    "undeclared values go to an implicit 'other' level"),
    "binary": ("binary", 'values: ["false", "true"]', "a boolean column's two values"),
    "tokens": ("tokens", "vocabulary: TODO", "a file of public words, one per line; also "
               "max_per_row: a public cap on words per row"),
}


def schema_text(data: Path, features: list[tuple[str, str]]) -> str:
    """The schema's YAML: one entry per column, its kind from the storage type, domains TODO."""
    lines = [f"# Schema of {data.name}, written by `dpcli init` from the file's structure only.",
             "# Each domain below is public knowledge you declare (rule: never read it off the",
             "# private file). Values outside a declared domain are clamped or mapped to 'other'",
             "# and counted, never used to widen it.",
             "missing: error                # a missing value stops a run before any charge; "
             "or impute (per column too)",
             "columns:"]
    for name, kind in features:
        key = _yaml_key(name)
        if kind == "skip":
            lines.append(f"  # {key}: left out (its storage type is not one dpcli reads as a "
                         "feature)")
        elif kind == "unknown":
            # a CSV header has no types: the kind is the custodian's to declare; with it
            # declared, `schema suggest` can propose a domain left TODO (bounds, categories)
            lines.append(f"  {key}: {{type: TODO}}   # e.g. {{type: numeric, bounds: TODO}} or "
                         "{type: categorical, categories: TODO} (schema suggest can propose "
                         "the TODO domain), {type: binary, values: [a, b]}, or {type: tokens, "
                         "vocabulary: FILE}")
        else:
            typ, domain, how = _HOW[kind]
            lines.append(f"  {key}: {{type: {typ}, {domain}}}   # {how}")
    return "\n".join(lines) + "\n"


def _yaml_key(name: str) -> str:
    """A column name as a YAML scalar (quoted when plain YAML would read it otherwise)."""
    import yaml

    plain = yaml.safe_dump(name, default_style=None).strip().removesuffix("...").strip()
    return plain if plain == name else yaml.safe_dump(name, default_style='"').strip()
