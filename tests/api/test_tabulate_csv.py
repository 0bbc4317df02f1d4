"""tabulate's CSV is written without pandas: the same text pandas wrote."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpcli.api.tabulate import rows_csv


def test_rows_csv_is_the_text_pandas_wrote() -> None:
    rows: list[dict[str, object]] = [
        {"table": "label", "level": "all", "class": "0", "count": 718, "lower": 672,
         "upper": 764},
        {"table": "age", "level": "[17, 24.3)", "class": "1", "count": int(np.int64(0)),
         "lower": 0, "upper": 46},
        {"table": "say \"hi\"", "level": "a\nb", "class": "x,y", "count": 3, "lower": 0,
         "upper": 9},
    ]
    assert rows_csv(rows) == pd.DataFrame(rows).to_csv(index=False)
