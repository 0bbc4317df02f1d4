"""dpcli: differentially private machine learning on tabular data.

Every release is ε-DP (or (ε, δ)-DP where a mechanism says so) under
*replace-one* neighbours: datasets of the same public size n that differ in
one record.
"""

__version__ = "0.1.0"

NEIGHBOURING_RELATION = "replace-one"
