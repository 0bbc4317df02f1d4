"""Differentially private mechanisms: samplers, noise, selection, composition.

Mechanisms see statistics and a numpy Generator, never files. Every
noise-adding function states in its docstring what it releases, the
sensitivity the caller must supply (under replace-one neighbours), the noise
and its scale, and the ε (δ) it costs.
"""

from typing import TYPE_CHECKING

from dpcli.mechanisms.composition import Plan, PlanMisuse, Spending, Step
from dpcli.mechanisms.exponential import (
    exponential_mechanism,
    exponential_probabilities,
    exponential_top_k,
    noisy_max_exponential,
)
from dpcli.mechanisms.laplace import (
    discrete_laplace_cdf,
    discrete_laplace_mechanism,
    discrete_laplace_pmf,
    grid_laplace_mechanism,
    laplace_cdf,
    laplace_grid,
    laplace_mechanism,
)
from dpcli.mechanisms.rng import make_rng
from dpcli.mechanisms.smooth import (
    heavy_tailed_cdf,
    heavy_tailed_noise,
    heavy_tailed_pdf,
    smooth_beta,
    smooth_noise_scale,
    smooth_sensitivity,
    smooth_sensitivity_mechanism,
)
from dpcli.mechanisms.smooth_stats import (
    Trimmed,
    mean_sensitivity_at,
    smooth_sensitivity_trimmed_mean,
    smooth_sensitivity_trimmed_variance,
    trim_count,
    trimmed_stats,
    variance_sensitivity_at,
)

if TYPE_CHECKING:   # the type checker sees the names the lazy import below hands out
    from dpcli.mechanisms.erm import (
        PrivateFit,
        l2_laplace_vector,
        objective_constants,
        objective_perturbation,
        output_perturbation,
    )

#: names of dpcli.mechanisms.erm, imported on first use (PEP 562): it needs scipy's sparse
#: and linear-algebra modules, about a third of a second of start-up that only
#: ``validate`` needs (docs/scale.md, fixed cost)
_LAZY = {"PrivateFit", "l2_laplace_vector", "objective_constants", "objective_perturbation",
         "output_perturbation"}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        from dpcli.mechanisms import erm

        return getattr(erm, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Plan",
    "PlanMisuse",
    "PrivateFit",
    "Spending",
    "Step",
    "Trimmed",
    "discrete_laplace_cdf",
    "discrete_laplace_mechanism",
    "discrete_laplace_pmf",
    "exponential_mechanism",
    "exponential_probabilities",
    "exponential_top_k",
    "grid_laplace_mechanism",
    "heavy_tailed_cdf",
    "heavy_tailed_noise",
    "heavy_tailed_pdf",
    "l2_laplace_vector",
    "laplace_cdf",
    "laplace_grid",
    "laplace_mechanism",
    "make_rng",
    "mean_sensitivity_at",
    "noisy_max_exponential",
    "objective_constants",
    "objective_perturbation",
    "output_perturbation",
    "smooth_beta",
    "smooth_noise_scale",
    "smooth_sensitivity",
    "smooth_sensitivity_mechanism",
    "smooth_sensitivity_trimmed_mean",
    "smooth_sensitivity_trimmed_variance",
    "trim_count",
    "trimmed_stats",
    "variance_sensitivity_at",
]
