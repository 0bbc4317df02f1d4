"""Differentially private mechanisms: samplers, noise, selection, composition.

Mechanisms see statistics and a numpy Generator, never files. Every
noise-adding function states in its docstring what it releases, the
sensitivity the caller must supply (under replace-one neighbours), the noise
and its scale, and the ε (δ) it costs.
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:   # the type checker sees the names the lazy import below hands out
    from dpcli.mechanisms.composition import Plan, PlanMisuse, Spending, Step
    from dpcli.mechanisms.erm import (
        PrivateFit,
        l2_laplace_vector,
        objective_constants,
        objective_perturbation,
        output_perturbation,
    )
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

#: each public name and the submodule that defines it, imported on first use (PEP 562):
#: reading a spec or the ledger (dpcli.params, dpcli.run) must not import numpy and the
#: samplers (docs/scale.md, fixed cost); dpcli.mechanisms.erm needs scipy's sparse and
#: linear-algebra modules too, about a third of a second that only ``validate`` needs
_HOME = {
    "Plan": "composition",
    "PlanMisuse": "composition",
    "Spending": "composition",
    "Step": "composition",
    "exponential_mechanism": "exponential",
    "exponential_probabilities": "exponential",
    "exponential_top_k": "exponential",
    "noisy_max_exponential": "exponential",
    "discrete_laplace_cdf": "laplace",
    "discrete_laplace_mechanism": "laplace",
    "discrete_laplace_pmf": "laplace",
    "grid_laplace_mechanism": "laplace",
    "laplace_cdf": "laplace",
    "laplace_grid": "laplace",
    "laplace_mechanism": "laplace",
    "make_rng": "rng",
    "heavy_tailed_cdf": "smooth",
    "heavy_tailed_noise": "smooth",
    "heavy_tailed_pdf": "smooth",
    "smooth_beta": "smooth",
    "smooth_noise_scale": "smooth",
    "smooth_sensitivity": "smooth",
    "smooth_sensitivity_mechanism": "smooth",
    "Trimmed": "smooth_stats",
    "mean_sensitivity_at": "smooth_stats",
    "smooth_sensitivity_trimmed_mean": "smooth_stats",
    "smooth_sensitivity_trimmed_variance": "smooth_stats",
    "trim_count": "smooth_stats",
    "trimmed_stats": "smooth_stats",
    "variance_sensitivity_at": "smooth_stats",
    "PrivateFit": "erm",
    "l2_laplace_vector": "erm",
    "objective_constants": "erm",
    "objective_perturbation": "erm",
    "output_perturbation": "erm",
}


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


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
