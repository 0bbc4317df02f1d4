"""k-means on released points (post-processing): recovery, capping, determinism, validation.

All data are drawn from fixed seeds. The blobs are separated by more than
40 standard deviations, so for a correct implementation the assertions
below hold for every seed, not just with high probability.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dpcli.mechanisms import make_rng
from dpcli.mechanisms.kmeans import kmeans

MEANS = np.array([[0.0, 0.0], [100.0, 0.0], [0.0, 100.0], [100.0, 100.0]])


def blobs(seed: int, per_blob: int = 50, sd: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    truth = np.repeat(np.arange(len(MEANS)), per_blob)
    points = MEANS[truth] + rng.normal(0.0, sd, size=(len(truth), 2))
    perm = rng.permutation(len(truth))
    return points[perm], truth[perm]


def agree_up_to_permutation(labels: np.ndarray, truth: np.ndarray) -> bool:
    k = int(truth.max()) + 1
    return any(np.array_equal(np.array(p)[labels], truth)
               for p in itertools.permutations(range(k)))


@pytest.mark.parametrize("seed", range(8))
def test_recovers_well_separated_blobs(seed: int) -> None:
    points, truth = blobs(seed)
    centres, labels = kmeans(points, 4, 20, make_rng(seed))
    assert centres.shape == (4, 2)
    assert labels.shape == (len(points),)
    assert set(labels.tolist()) == {0, 1, 2, 3}
    assert agree_up_to_permutation(labels, truth)
    # each centre is the mean of its cluster, close to one blob's true mean
    for j in range(4):
        np.testing.assert_allclose(centres[j], points[labels == j].mean(axis=0))
        assert np.min(np.linalg.norm(MEANS - centres[j], axis=1)) < 1.5
    matched = {int(np.argmin(np.linalg.norm(MEANS - c, axis=1))) for c in centres}
    assert matched == {0, 1, 2, 3}


def test_each_point_is_assigned_to_its_nearest_centre() -> None:
    points = np.random.default_rng(9).normal(size=(300, 3)) * [1.0, 5.0, 0.2]
    centres, labels = kmeans(points, 6, 50, make_rng(9))
    distances = np.linalg.norm(points[:, None, :] - centres[None, :, :], axis=2)
    np.testing.assert_array_equal(labels, np.argmin(distances, axis=1))


def test_number_of_centres_is_capped_at_distinct_points() -> None:
    points = np.array([[1.0, 1.0], [1.0, 1.0], [5.0, 5.0], [5.0, 5.0], [5.0, 5.0]])
    centres, labels = kmeans(points, 10, 20, make_rng(0))
    assert centres.shape == (2, 2)
    assert sorted(map(tuple, centres.tolist())) == [(1.0, 1.0), (5.0, 5.0)]
    assert labels[0] == labels[1] != labels[2] == labels[3] == labels[4]
    # one distinct point: one centre
    centres, labels = kmeans(np.full((7, 2), 3.0), 5, 20, make_rng(0))
    assert centres.tolist() == [[3.0, 3.0]]
    assert labels.tolist() == [0] * 7


def test_fewer_centres_than_requested_when_k_equals_points() -> None:
    points = np.array([[0.0], [10.0], [20.0]])
    centres, labels = kmeans(points, 3, 5, make_rng(1))
    assert sorted(centres.ravel().tolist()) == [0.0, 10.0, 20.0]
    assert len(set(labels.tolist())) == 3


def test_deterministic_under_a_seed() -> None:
    points = np.random.default_rng(4).normal(size=(200, 2))  # no structure: seeding matters
    a = kmeans(points, 5, 10, make_rng(123))
    b = kmeans(points, 5, 10, make_rng(123))
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    others = [kmeans(points, 5, 10, make_rng(s))[0] for s in range(10)]
    assert any(not np.allclose(np.sort(o, axis=0), np.sort(a[0], axis=0)) for o in others)


def test_does_not_modify_its_input() -> None:
    points, _ = blobs(0)
    copy = points.copy()
    kmeans(points, 4, 20, make_rng(0))
    np.testing.assert_array_equal(points, copy)


def test_integer_points_are_accepted() -> None:
    points = np.array([[0, 0], [0, 1], [50, 50], [51, 50]])
    centres, labels = kmeans(points, 2, 10, make_rng(2))
    assert labels[0] == labels[1] != labels[2] == labels[3]
    assert sorted(map(tuple, centres.tolist())) == [(0.0, 0.5), (50.5, 50.0)]


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"points": np.zeros(5)}, ValueError),           # not 2-D
    ({"points": np.zeros((0, 2))}, ValueError),      # empty
    ({"points": np.zeros((2, 2, 2))}, ValueError),
    ({"points": [["a", "b"]]}, TypeError),
    ({"centers": 0}, ValueError),
    ({"centers": 2.5}, TypeError),
    ({"rounds": 0}, ValueError),
    ({"rounds": True}, TypeError),
    ({"rng": 0}, TypeError),
])
def test_rejects_bad_arguments(kwargs: dict, error: type[Exception]) -> None:
    params = {"points": np.zeros((4, 2)), "centers": 2, "rounds": 5,
              "rng": make_rng(0)} | kwargs
    with pytest.raises(error):
        kmeans(params["points"], params["centers"], params["rounds"], params["rng"])
