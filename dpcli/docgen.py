"""The command reference pages, generated from the CLI itself so they never drift.

``python -m dpcli.docgen docs/commands`` writes ``docs/commands/<command>.md`` for every
command of the Typer app and ``docs/commands/index.md`` listing them. Each page holds the
usage line, the command's docstring (what it releases and at what cost), a table of every
option (from the click parameters of ``typer.main.get_command(app)``), a table of the spec
section's keys (from :data:`dpcli.params.SECTIONS`) where the command has one, a "Measured"
line linking to the algorithm page and the results page, and the examples its ``--help``
shows. ``tests/cli/test_docs.py`` checks that the committed pages equal the generated ones.

Nothing here reads data or spends budget: it only formats declarations.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: command → (its page under docs/algorithms/ (or a path from docs/commands/ where it has none),
#: its heading in docs/results.md or "").
#: A fixed map: the pages are hand-written and so are the results' sections.
MEASURED: dict[str, tuple[str, str]] = {
    "tabulate": ("../tour.md#tabulate", ""),
    "select-features": ("feature-selection.md", "select-features"),
    "train-nb": ("naive-bayes.md", "train-nb"),
    "train-brc": ("brc.md", "train-brc"),
    "validate": ("logistic-regression.md", "validate"),
    "predict": ("naive-bayes.md", "train-nb"),
    "roc": ("roc.md", "roc"),
    "evaluate": ("roc.md", ""),
    "publish-grid": ("privpfc.md", "publish-grid"),
    "synthesize": ("privpfc.md", "publish-grid"),
}

_TYPES = {"str": "TEXT", "Path": "PATH", "int": "INTEGER", "float": "FLOAT", "bool": "flag"}


def _commands(group: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every leaf command of the click group, as (name path, command), in the app's order."""
    for name, command in group.commands.items():
        path = (*prefix, name)
        if hasattr(command, "commands"):
            yield from _commands(command, path)
        else:
            yield path, command


def _cell(text: Any) -> str:
    """One Markdown table cell: no line breaks, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _split_doc(doc: str) -> tuple[str, str]:
    """The docstring's description and its examples (everything from "Example")."""
    doc = textwrap.dedent(doc or "").strip()
    at = doc.find("Example")
    if at < 0:
        return doc, ""
    return doc[:at].rstrip(), doc[at:]


def _examples(text: str) -> str:
    """The examples as Markdown: the indented command lines in ```sh fences, prose as is."""
    out: list[str] = []
    block: list[str] = []
    for line in text.splitlines()[1:]:          # the first line is the "Example:" heading
        if line.startswith("    ") or (block and not line.strip()):
            block.append(line[4:])
            continue
        if block:
            while block and not block[-1].strip():
                block.pop()
            out += ["```sh", *block, "```", ""]
            block = []
        out.append(line)
    if block:
        while block and not block[-1].strip():
            block.pop()
        out += ["```sh", *block, "```"]
    return "\n".join(out).strip()


def _option_row(param: Any) -> str:
    names = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
    if param.param_type_name == "argument":
        names = f"`{param.name.upper()}` (argument)"
    annotation = getattr(param.type_descriptor, "annotation", None)
    kind = _TYPES.get(getattr(annotation, "__name__", ""), getattr(annotation, "__name__", ""))
    default = param.default
    if param.required:
        kind += ", required"
    elif default not in (None, False, ()):
        kind += f", default `{default}`"
    return f"| {names} | {_cell(kind)} | {_cell(param.help or '')} |"


def _number(value: float) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


def _json(schema: Any) -> str:
    """What a key accepts, in words where the JSON Schema is simple, else the schema itself."""
    if "oneOf" in schema:
        return " or ".join(_json(s) for s in schema["oneOf"])
    if "enum" in schema:
        return "one of " + ", ".join(f"`{v}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{schema['const']}`"
    kind = schema.get("type")
    bounds = [f"{op} {_number(schema[key])}" for key, op in (
        ("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"), ("exclusiveMaximum", "<"))
        if key in schema]
    if kind in ("number", "integer") and set(schema) <= {
            "type", "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}:
        return kind + (" " + ", ".join(bounds) if bounds else "")
    if kind in ("boolean", "string") and set(schema) == {"type"}:
        return kind
    if kind == "array" and isinstance(schema.get("items"), dict):
        items = schema["items"]
        item = ("declared column names" if items.get("type") == ["string", "integer"]
                else _json(items))
        size = [f"{op} {schema[key]}" for key, op in (("minItems", "at least"),
                                                      ("maxItems", "at most")) if key in schema]
        if schema.get("minItems") == schema.get("maxItems") is not None:
            size = [f"exactly {schema['minItems']}"]
        if schema.get("uniqueItems"):
            size.append("distinct")
        return f"list of {item}" + (f" ({', '.join(size)})" if size else "")
    if kind == "object" and isinstance(schema.get("properties"), dict):
        props = schema["properties"]
        kinds = {_json(s) for s in props.values()}
        if len(kinds) == 1:
            return ("mapping of " + ", ".join(f"`{k}`" for k in sorted(props))
                    + f" to {kinds.pop()}")
    return "`" + json.dumps(schema, ensure_ascii=False, sort_keys=True) + "`"


def page(path: tuple[str, ...], command: Any) -> str:
    """The reference page of one command, as Markdown."""
    from dpcli.params import SECTIONS

    name = " ".join(path)
    # the command's own context class: typer vendors click, so no click import is needed
    ctx = command.context_class(command, info_name=f"dpcli {name}")
    # the usage pieces, not click's formatted usage: that wraps at the terminal's width
    pieces = " ".join(command.collect_usage_pieces(ctx)).replace("{", "").replace("}", "")
    usage = f"dpcli {name} {pieces}"
    description, examples = _split_doc(command.help or "")
    lines = [f"# dpcli {name}", "",
             "<!-- Generated by `python -m dpcli.docgen docs/commands` from the command's "
             "docstring, options and spec section: edit those, then regenerate. -->", "",
             "```text", usage, "```", "", description, "",
             "## Options", "", "| option | type | help |", "| --- | --- | --- |"]
    lines += [_option_row(p) for p in command.params if not getattr(p, "hidden", False)]
    section = SECTIONS.get(name)
    if section is not None:
        lines += ["", "## Spec section", "",
                  f"The spec's `{name}:` section ({_cell(section.help)}); the command line's "
                  "options override it for one run. Every key is checked where it is read: "
                  "[the spec](../spec.md).", "",
                  "| key | accepts | help |", "| --- | --- | --- |"]
        lines += [f"| `{p.key}` | {_cell(_json(p.json))} | {_cell(p.help)} |"
                  for p in section.params]
    algorithm, results = MEASURED.get(name, ("", ""))
    if name in MEASURED:
        links = []
        if algorithm:
            page = algorithm if algorithm.startswith("../") else f"../algorithms/{algorithm}"
            links.append(f"[how it works and its options]({page})")
        links.append(f"[measured results](../results.md{'#' + results if results else ''})")
        lines += ["", "## Measured", "", "Measured: " + "; ".join(links) + "."]
    if examples:
        lines += ["", "## Examples", "", _examples(examples)]
    return "\n".join(lines).rstrip() + "\n"


def pages() -> dict[str, str]:
    """Every page by file name: one per command and ``index.md``."""
    import typer.main

    from dpcli.cli.app import app

    out: dict[str, str] = {}
    rows = ["# Command reference", "",
            "<!-- Generated by `python -m dpcli.docgen docs/commands`. -->", "",
            "One page per command, generated from its `--help`, its options and its spec "
            "section. Back to [the documentation](../index.md).", "",
            "| command | what it does |", "| --- | --- |"]
    for path, command in _commands(typer.main.get_command(app)):
        file = "-".join(path) + ".md"
        out[file] = page(path, command)
        summary = (command.help or "").strip().splitlines()[0] if command.help else ""
        rows.append(f"| [`dpcli {' '.join(path)}`]({file}) | {_cell(summary)} |")
    out["index.md"] = "\n".join(rows) + "\n"
    return out


def write(folder: Path) -> list[Path]:
    """Write every page into ``folder``, removing stale generated pages; returns the written."""
    folder.mkdir(parents=True, exist_ok=True)
    generated = pages()
    for stale in folder.glob("*.md"):
        if stale.name not in generated:
            stale.unlink()
    written = []
    for name, text in generated.items():
        (folder / name).write_text(text)
        written.append(folder / name)
    return written


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m dpcli.docgen FOLDER", file=sys.stderr)
        return 64
    for path in write(Path(args[0])):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
