"""The neighbouring relation a run's guarantee holds under, in words.

Every release is ε-DP under replace-one neighbours unless the spec declares
something public in words (design notes, rule 1). The ledger and every output
record the relation as a short string; :func:`describe` turns it into the lines
that ``--dry-run`` and the plan summary print before anything is charged.
"""

from __future__ import annotations

from collections.abc import Sequence

from dpcli import NEIGHBOURING_RELATION

_PARTIAL = "replace-one on private features; public, not protected: "
#: what every relation treats as public: facts the spec declares, and the record count
ALWAYS_PUBLIC = ("the number of records n and the spec's declared domains (bounds, "
                 "categories, vocabularies, taxonomies)")


def partial(public_columns: Sequence[str]) -> str:
    """The relation of a run that treats the label and ``public_columns`` as public."""
    return _PARTIAL + ", ".join(["label", *public_columns])


def describe(relation: str = NEIGHBOURING_RELATION) -> tuple[str, str, str]:
    """(neighbours, protected, public) in words for a recorded relation string."""
    if relation.startswith(_PARTIAL):
        declared = relation[len(_PARTIAL):].split(", ")
        columns = [c for c in declared if c != "label"]
        return ("two datasets of the same size n that differ in the private features of "
                "one record",
                "every column except " + ", ".join(columns) + ", of every record",
                "the label (declared 'label: public: true') and "
                + ", ".join(columns) + " (declared under train-brc.public), not protected; "
                + ALWAYS_PUBLIC)
    return ("two datasets of the same size n that differ in one record (replace-one)",
            "every column and the label of every record",
            ALWAYS_PUBLIC)


def lines(relation: str = NEIGHBOURING_RELATION) -> list[str]:
    """The three lines shown before a run: neighbours, what is protected, what is public."""
    neighbours, protected, public = describe(relation)
    return [f"neighbours: {neighbours}", f"protected: {protected}", f"public: {public}"]
