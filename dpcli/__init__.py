"""dpcli: differentially private machine learning on tabular data.

Every release is ε-DP (or (ε, δ)-DP where a mechanism says so) under
*replace-one* neighbours: datasets of the same public size n that differ in
one record.
"""

__version__ = "0.1.0"

NEIGHBOURING_RELATION = "replace-one"

__all__ = ["NEIGHBOURING_RELATION", "Session", "__version__", "load_model"]


def __getattr__(name: str) -> object:
    # the library's entry points, imported on first use so that `dpcli --help` and the CLI's
    # start stay light (numpy and pyarrow load only when a command needs them)
    if name == "Session":
        from dpcli.session import Session

        return Session
    if name == "load_model":
        from dpcli.models import load_model

        return load_model
    raise AttributeError(f"module 'dpcli' has no attribute {name!r}")



def __dir__() -> list[str]:
    # the lazy entry points above are part of the package's face: list them for dir() and
    # a notebook's completion
    return sorted(set(globals()) | set(__all__))
