"""roc's curve.png (dpcli/plot.py): a PNG of the released curve, drawn without matplotlib."""

from __future__ import annotations

import io
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from dpcli.plot import _dashed, roc_png

PIL = pytest.importorskip("PIL.Image")


def curve(auc: float = 0.8) -> SimpleNamespace:
    fpr = np.array([0.0, 0.1, 0.3, 0.6, 1.0])
    return SimpleNamespace(fpr=fpr, tpr=np.sqrt(fpr), auc=auc)


def bars() -> dict[str, object]:
    tpr = curve().tpr
    return {"auc": (0.7, 0.9), "level": 0.9, "tpr_lower": np.clip(tpr - 0.1, 0, 1),
            "tpr_upper": np.clip(tpr + 0.1, 0, 1)}


def decode(png: bytes) -> object:
    image = PIL.open(io.BytesIO(png))
    image.load()
    return image


def pixels(image: object) -> np.ndarray:
    return np.asarray(image.convert("RGB"), dtype=np.int16)  # type: ignore[attr-defined]


def test_a_png_with_dpcli_as_its_software_and_the_curve_in_blue() -> None:
    png = roc_png(curve(), title="private ROC, ε=1 (fixed-space, hierarchical)")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    image = decode(png)
    assert image.info.get("Software") == "dpcli"  # type: ignore[attr-defined]
    rgb = pixels(image)
    blue = (np.abs(rgb - np.array([31, 119, 180])).sum(axis=2) < 40).sum()
    assert blue > 300  # a 2-pixel line across a 400-pixel square
    assert (np.abs(rgb - np.array([214, 39, 40])).sum(axis=2) < 40).sum() == 0  # no red


def test_the_same_curve_gives_the_same_bytes() -> None:
    first = roc_png(curve(), title="t", bars=bars(), warning="noise dominates")
    assert roc_png(curve(), title="t", bars=bars(), warning="noise dominates") == first


def test_a_true_curve_is_red_and_adds_a_title_line_and_a_warning_adds_lines() -> None:
    plain = decode(roc_png(curve(), title="t"))
    true = roc_png(curve(), title="t", true_curve=curve(0.85))
    with_true = decode(true)
    assert with_true.height > plain.height  # type: ignore[attr-defined]
    assert (np.abs(pixels(with_true) - np.array([214, 39, 40])).sum(axis=2) < 40).sum() > 100
    warned = decode(roc_png(curve(), title="t", warning="word " * 60))
    assert warned.height > plain.height + 3 * 14  # type: ignore[attr-defined]


def test_error_bars_shade_the_band() -> None:
    plain = pixels(decode(roc_png(curve(), title="t")))
    shaded = pixels(decode(roc_png(curve(), title="t", bars=bars())))
    band = np.array([round(255 - 0.15 * (255 - c)) for c in (31, 119, 180)])
    assert (np.abs(shaded - band).sum(axis=2) < 6).sum() > 2000
    assert (np.abs(plain - band).sum(axis=2) < 6).sum() < 200


def test_dashes_cover_the_pattern_s_share_of_a_line() -> None:
    dashes = _dashed([(0.0, 0.0), (50.0, 0.0), (100.0, 0.0)], (3.0, 2.0))
    assert len(dashes) == 20
    assert sum(d[-1][0] - d[0][0] for d in dashes) == pytest.approx(60.0)
    assert dashes[0][0] == (0.0, 0.0) and dashes[1][0][0] == pytest.approx(5.0)


def test_drawing_imports_no_matplotlib() -> None:
    code = ("import sys, numpy as np\n"
            "from types import SimpleNamespace\n"
            "from dpcli.plot import roc_png\n"
            "c = SimpleNamespace(fpr=np.array([0.0, 1.0]), tpr=np.array([0.0, 1.0]), auc=0.5)\n"
            "roc_png(c, title='t')\n"
            "print('matplotlib' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"
