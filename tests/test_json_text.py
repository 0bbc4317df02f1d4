"""dpcli/json_text.py writes the same text as json.dumps(indent=2, ensure_ascii=False,
allow_nan=False), and refuses what it refuses with json's own error."""

from __future__ import annotations

import enum
import json
import random
from typing import Any

import numpy as np
import pytest

from dpcli.io import dumps_json
from dpcli.json_text import dumps_indented


def reference(obj: Any) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False)


class Level(enum.IntEnum):
    LOW = 1


class Text(str):
    pass


STRINGS = ["", "a", "é", "ε = 1", 'quote " and \\ back', "tab\tnew\nline\r", "\x00\x1f\x7f",
           "[{,:}]", "💡 emoji", "\u2028 sep", "a,\n  b"]


def random_leaf(rng: random.Random) -> Any:
    kind = rng.randrange(8)
    if kind == 0:
        return rng.choice(STRINGS)
    if kind == 1:
        return rng.choice([None, True, False])
    if kind == 2:
        return rng.randrange(-10**20, 10**20)
    if kind == 3:
        return rng.choice([0.0, -0.0, 1e-320, 1e300, 0.1, 1 / 3, -2.5e-7, 5e-324])
    if kind == 4:
        return rng.uniform(-1e6, 1e6)
    if kind == 5:
        return np.float64(rng.random())  # a float subclass: json writes float's repr
    if kind == 6:
        return Level.LOW  # an int subclass: int's repr
    return Text("sub")


def random_value(rng: random.Random, depth: int) -> Any:
    if depth == 0 or rng.random() < 0.3:
        return random_leaf(rng)
    size = rng.choice([0, 1, 2, 5, 30] if depth <= 2 else [0, 1, 2, 4])
    shape = rng.randrange(5)
    if shape == 0:
        return [random_value(rng, depth - 1) for _ in range(size)]
    if shape == 1:
        return tuple(random_value(rng, depth - 1) for _ in range(size))
    if shape == 2:  # a flat list of one type: the bulk of a model file
        return [rng.choice([rng.random(), rng.randrange(100), "s"]) for _ in range(size)]
    if shape == 3:
        return {rng.choice(STRINGS) + str(i): rng.random() for i in range(size)}
    return {rng.choice(STRINGS) + str(i): random_value(rng, depth - 1) for i in range(size)}


def test_random_structures_give_json_dumps_text() -> None:
    rng = random.Random(20261127)
    for _ in range(3000):
        obj = random_value(rng, 5)
        assert dumps_indented(obj) == reference(obj)


@pytest.mark.parametrize("obj", [
    {}, [], (), "", 0, -0.0, None, True, {"a": {}}, {"a": []}, [[], {}, [[]]],
    {"a": [1, 2.5, "x", None, True]}, [1.0, 2.0, 3.0], [1, 2, 3], ["x", "y"],
    {"k": 1.5, "j": 2.5}, {"nested": {"deep": {"deeper": [0.1, {"x": [1]}]}}},
])
def test_fixed_structures_give_json_dumps_text(obj: Any) -> None:
    assert dumps_indented(obj) == reference(obj)


@pytest.mark.parametrize("obj", [
    {1: "a", 2.5: "b", None: "c", False: "d"},   # keys json converts
    {"a": {3: [1.0]}},
    [1, 2.0, float("nan")], {"a": [float("inf")]}, float("-inf"),   # refused by json
    [1.0, float("nan")], {"x": 1.0, "y": float("nan")},
    {"a": object()}, [object()], {(1, 2): 3},
    {"a": [np.float64("nan")]},
])
def test_what_json_converts_or_refuses_is_json_s_own(obj: Any) -> None:
    try:
        expected: str | tuple[type, str] = reference(obj)
    except (TypeError, ValueError) as exc:
        expected = (type(exc), str(exc))
    try:
        got: str | tuple[type, str] = dumps_indented(obj)
    except (TypeError, ValueError) as exc:
        got = (type(exc), str(exc))
    assert got == expected


def test_a_cycle_is_refused_as_json_refuses_it() -> None:
    loop: dict[str, Any] = {}
    loop["self"] = [loop]
    with pytest.raises(ValueError, match="Circular reference"):
        dumps_indented(loop)


def test_dumps_json_ends_with_a_newline_and_parses_back() -> None:
    obj = {"payload": {"weights": {"age": 0.25, "sex": {"Male": -1.5}}, "n": 3}}
    text = dumps_json(obj)
    assert text == reference(obj) + "\n"
    assert json.loads(text) == obj
