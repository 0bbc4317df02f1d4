"""PNG pictures of released curves (matplotlib, imported only when a picture is drawn)."""

from __future__ import annotations

import io
import textwrap
from typing import Any


def roc_png(curve: Any, *, title: str, true_curve: Any = None,
            bars: dict[str, Any] | None = None, warning: str | None = None) -> bytes:
    """The private ROC curve as a PNG; ``true_curve`` (public data only) drawn beside it.

    ``bars`` (the release's error bars) shade each point's TPR interval and put the AUC's
    interval in the legend; ``warning`` (e.g. noise dominates) is printed under the plot:
    the picture is what people paste into slides, so it carries the release's uncertainty
    and its caution, not just a line. A true curve is labelled as NOT private in the legend
    and the title, so a picture that carries one can not be mistaken for a release.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 5.5), dpi=100)
    try:
        ax.plot([0, 1], [0, 1], color="0.75", linestyle=":", linewidth=1, label="chance")
        label = f"private (AUC {curve.auc:.3f})"
        if bars is not None:
            lo, hi = bars["auc"]
            label = f"private (AUC {curve.auc:.3f}; {bars['level']:.0%} interval {lo:.3f}–{hi:.3f})"
            ax.fill_between(curve.fpr, bars["tpr_lower"], bars["tpr_upper"], color="tab:blue",
                            alpha=0.15, linewidth=0, label="TPR error bars")
        ax.plot(curve.fpr, curve.tpr, color="tab:blue", linewidth=2, label=label)
        if true_curve is not None:
            ax.plot(true_curve.fpr, true_curve.tpr, color="tab:red", linestyle="--",
                    linewidth=1.5,
                    label=f"TRUE — NOT PRIVATE, public data only (AUC {true_curve.auc:.3f})")
            title = f"{title}\nincludes the TRUE curve (NOT private): research on public data"
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.01)
        ax.set_xlabel("false positive rate")
        ax.set_ylabel("true positive rate")
        ax.set_title(title, fontsize=10)
        ax.set_aspect("equal")
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
        if warning is not None:
            fig.text(0.5, -0.02, "\n".join(textwrap.wrap(f"caution: {warning}", 80)),
                     ha="center", va="top", fontsize=8, color="tab:red")
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", bbox_inches="tight", metadata={"Software": "dpcli"})
        return buffer.getvalue()
    finally:
        plt.close(fig)
