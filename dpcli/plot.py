"""PNG pictures of released curves, drawn with Pillow (imported only when a picture is drawn).

Why not matplotlib: on a small file its import and one figure's layout and render cost
~0.4 s of CPU, half of a 1,000-row ``roc`` run; this picture (axes, ticks, grid, curves,
a band, a legend, a title and a caution) costs ~0.05 s drawn directly. Shapes are drawn at
3× and reduced (antialiasing by box averaging); text is drawn at 1× by FreeType, in
DejaVu Sans (the font matplotlib ships, found without importing matplotlib; Pillow's
default font when it is absent). The picture is post-processing of the release (every
value on it is in curve.json); it is not part of any check.
"""

from __future__ import annotations

import io
import itertools
import textwrap
from collections.abc import Sequence
from typing import Any

#: supersampling factor of the shapes
_S = 3
#: matplotlib's tab:blue and tab:red, the colours the picture has always had
_BLUE = (31, 119, 180)
_RED = (214, 39, 40)
_GREY = (191, 191, 191)
_GRID = (222, 222, 222)
_TEXT = (0, 0, 0)
#: the plot's square, the margins around it (pixels of the output)
_SIDE = 400
_LEFT, _RIGHT = 64, 24
_TICKS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


def _font(size: int) -> Any:
    from PIL import ImageFont

    path = _dejavu()
    if path is not None:
        return ImageFont.truetype(path, size)
    return ImageFont.load_default(size)  # pragma: no cover - matplotlib's font absent


def _dejavu() -> str | None:
    """matplotlib's DejaVu Sans (Greek letters, dashes), found without importing it."""
    import importlib.util
    import os

    spec = importlib.util.find_spec("matplotlib")
    if spec is None or spec.origin is None:  # pragma: no cover - matplotlib not installed
        return None
    path = os.path.join(os.path.dirname(spec.origin), "mpl-data", "fonts", "ttf",
                        "DejaVuSans.ttf")
    return path if os.path.isfile(path) else None


def _dashed(points: Sequence[tuple[float, float]], pattern: tuple[float, float]
            ) -> list[list[tuple[float, float]]]:
    """The dashes of a polyline: pieces ``pattern[0]`` long every ``sum(pattern)``."""
    on, off = pattern
    dashes: list[list[tuple[float, float]]] = []
    current: list[tuple[float, float]] = []
    drawing, left = True, on
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        length = ((x1 - x0) ** 2 + (y1 - y0) ** 2) ** 0.5
        start = 0.0
        while length - start > 1e-9:
            step = min(left, length - start)
            t0, t1 = start / length, (start + step) / length
            a = (x0 + (x1 - x0) * t0, y0 + (y1 - y0) * t0)
            b = (x0 + (x1 - x0) * t1, y0 + (y1 - y0) * t1)
            if drawing:
                if not current:
                    current.append(a)
                current.append(b)
            start += step
            left -= step
            if left <= 1e-9:
                if drawing and current:
                    dashes.append(current)
                    current = []
                drawing = not drawing
                left = on if drawing else off
    if current:
        dashes.append(current)
    return dashes


def roc_png(curve: Any, *, title: str, true_curve: Any = None,
            bars: dict[str, Any] | None = None, warning: str | None = None) -> bytes:
    """The private ROC curve as a PNG; ``true_curve`` (public data only) drawn beside it.

    ``bars`` (the release's error bars) shade each point's TPR interval and put the AUC's
    interval in the legend; ``warning`` (e.g. noise dominates) is printed under the plot:
    the picture is what people paste into slides, so it carries the release's uncertainty
    and its caution, not just a line. A true curve is labelled as NOT private in the legend
    and the title, so a picture that carries one can not be mistaken for a release.
    """
    import numpy as np
    from PIL import Image, ImageDraw, PngImagePlugin

    label = f"private (AUC {curve.auc:.3f})"
    if bars is not None:
        lo, hi = bars["auc"]
        label = f"private (AUC {curve.auc:.3f}; {bars['level']:.0%} interval {lo:.3f}–{hi:.3f})"
    if true_curve is not None:
        title = f"{title}\nincludes the TRUE curve (NOT private): research on public data"
    title_font, tick_font, small_font = _font(13), _font(12), _font(10)
    title_lines = title.split("\n")
    caution = (textwrap.wrap(f"caution: {warning}", 80) if warning is not None else [])
    top = 12 + 17 * len(title_lines)
    bottom = top + _SIDE
    width = _LEFT + _SIDE + _RIGHT
    height = bottom + 48 + (14 * len(caution) + 6 if caution else 0)

    def px(x: float, y: float) -> tuple[float, float]:  # data -> supersampled pixels
        return ((_LEFT + x * _SIDE) * _S, (bottom - y / 1.01 * _SIDE) * _S)

    def points_of(xs: Any, ys: Any) -> list[tuple[float, float]]:  # a curve, in pixels
        x = (_LEFT + np.asarray(xs, dtype=float) * _SIDE) * _S
        y = (bottom - np.asarray(ys, dtype=float) / 1.01 * _SIDE) * _S
        return list(zip(x.tolist(), y.tolist(), strict=True))

    big = Image.new("RGB", (width * _S, height * _S), "white")
    draw = ImageDraw.Draw(big)
    for t in _TICKS:  # the grid
        draw.line([px(t, 0), px(t, 1.01)], fill=_GRID, width=_S)
        draw.line([px(0, t), px(1, t)], fill=_GRID, width=_S)
    legend: list[tuple[str, Any, tuple[float, float] | None, str]] = [
        ("line", _GREY, (1.5, 2.5), "chance")]
    if bars is not None:  # the TPR band: 15 % of tab:blue over what is below
        band = (points_of(curve.fpr, bars["tpr_upper"])
                + points_of(curve.fpr, bars["tpr_lower"])[::-1])
        ImageDraw.Draw(big, "RGBA").polygon(band, fill=(*_BLUE, round(0.15 * 255)))
        legend.append(("patch", _BLUE, None, "TPR error bars"))
    for dash in _dashed([px(0, 0), px(1, 1)], (1.5 * _S, 2.5 * _S)):
        draw.line(dash, fill=_GREY, width=_S)
    draw.line(points_of(curve.fpr, curve.tpr), fill=_BLUE, width=2 * _S, joint="curve")
    legend.append(("line", _BLUE, None, label))
    if true_curve is not None:
        for dash in _dashed(points_of(true_curve.fpr, true_curve.tpr), (5.5 * _S, 2.5 * _S)):
            draw.line(dash, fill=_RED, width=round(1.5 * _S))
        legend.append(("line", _RED, (5.5, 2.5),
                       f"TRUE — NOT PRIVATE, public data only (AUC {true_curve.auc:.3f})"))
    x0, y0 = px(0, 1.01)
    x1, y1 = px(1, 0)
    draw.rectangle([x0, y0, x1, y1], outline=_TEXT, width=_S)
    for t in _TICKS:  # tick marks, outward
        (tx, _), (_, ty) = px(t, 0), px(0, t)
        draw.line([(tx, y1), (tx, y1 + 4 * _S)], fill=_TEXT, width=_S)
        draw.line([(x0 - 4 * _S, ty), (x0, ty)], fill=_TEXT, width=_S)
    _legend_shapes(draw, legend, small_font, x1 / _S, y1 / _S)
    image = big.reduce(_S)
    draw = ImageDraw.Draw(image)
    for i, line in enumerate(title_lines):
        draw.text((_LEFT + _SIDE / 2, 6 + 17 * i), line, font=title_font, fill=_TEXT,
                  anchor="ma")
    for t in _TICKS:
        tx, ty = _LEFT + t * _SIDE, bottom - t / 1.01 * _SIDE
        draw.text((tx, bottom + 6), f"{t:.1f}", font=tick_font, fill=_TEXT, anchor="ma")
        draw.text((_LEFT - 7, ty), f"{t:.1f}", font=tick_font, fill=_TEXT, anchor="rm")
    draw.text((_LEFT + _SIDE / 2, bottom + 24), "false positive rate", font=tick_font,
              fill=_TEXT, anchor="ma")
    _vertical_text(image, "true positive rate", tick_font, (14, top + _SIDE / 2))
    _legend_text(draw, legend, small_font, _LEFT + _SIDE, bottom)
    for i, line in enumerate(caution):
        draw.text((width / 2, bottom + 48 + 14 * i), line, font=small_font, fill=_RED,
                  anchor="ma")
    info = PngImagePlugin.PngInfo()
    info.add_text("Software", "dpcli")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", pnginfo=info)
    return buffer.getvalue()


#: the legend's layout (pixels of the output): row height, sample length, padding
_ROW, _SAMPLE, _PAD = 15, 24, 6


def _legend_box(entries: list[Any], font: Any, right: float, bottom: float
                ) -> tuple[float, float, float, float]:
    text_width = max(font.getlength(e[3]) for e in entries)
    box_width = _PAD * 3 + _SAMPLE + text_width
    box_height = _PAD * 2 + _ROW * len(entries)
    return right - 8 - box_width, bottom - 8 - box_height, right - 8, bottom - 8


def _legend_shapes(draw: Any, entries: list[Any], font: Any, right: float,
                   bottom: float) -> None:
    """The legend's frame and samples (supersampled); its text comes after the reduction."""
    left, top, r, b = _legend_box(entries, font, right, bottom)
    draw.rectangle([left * _S, top * _S, r * _S, b * _S], fill="white", outline=(204, 204, 204),
                   width=_S)
    for i, (kind, colour, pattern, _) in enumerate(entries):
        y = top + _PAD + _ROW * i + _ROW / 2
        a, z = left + _PAD, left + _PAD + _SAMPLE
        if kind == "patch":
            shade = tuple(round(255 - 0.15 * (255 - c)) for c in colour)
            draw.rectangle([a * _S, (y - 4) * _S, z * _S, (y + 4) * _S], fill=shade)
        elif pattern is None:
            draw.line([(a * _S, y * _S), (z * _S, y * _S)], fill=colour, width=2 * _S)
        else:
            for dash in _dashed([(a * _S, y * _S), (z * _S, y * _S)],
                                (pattern[0] * _S, pattern[1] * _S)):
                draw.line(dash, fill=colour, width=round(1.5 * _S))


def _legend_text(draw: Any, entries: list[Any], font: Any, right: float,
                 bottom: float) -> None:
    left, top, _, _ = _legend_box(entries, font, right, bottom)
    for i, (_, _, _, text) in enumerate(entries):
        y = top + _PAD + _ROW * i + _ROW / 2
        draw.text((left + 2 * _PAD + _SAMPLE, y), text, font=font, fill=_TEXT, anchor="lm")


def _vertical_text(image: Any, text: str, font: Any, centre: tuple[float, float]) -> None:
    """``text`` read bottom to top, centred on ``centre``."""
    from PIL import Image, ImageDraw

    left, top, right, bottom = font.getbbox(text)
    mask = Image.new("L", (right - left + 2, bottom - top + 2), 0)
    ImageDraw.Draw(mask).text((1 - left, 1 - top), text, font=font, fill=255)
    mask = mask.transpose(Image.Transpose.ROTATE_90)
    x, y = round(centre[0] - mask.width / 2), round(centre[1] - mask.height / 2)
    image.paste(_TEXT, (x, y, x + mask.width, y + mask.height), mask=mask)
