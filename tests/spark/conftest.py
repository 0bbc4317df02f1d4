"""A local Spark for the Spark engine's tests (one session for the whole run).

The master is ``DPCLI_SPARK_MASTER`` or ``local[2]``. Files are split into
partitions of at most 32 KiB, so that even the small samples are read by
several tasks and the driver really merges partial statistics. Tests that
need Spark skip cleanly when PySpark or Java is missing.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

MASTER = os.environ.get("DPCLI_SPARK_MASTER", "").strip() or "local[2]"
CONF = (("spark.ui.enabled", "false"), ("spark.sql.shuffle.partitions", "2"),
        ("spark.sql.files.maxPartitionBytes", "32k"),
        ("spark.sql.files.openCostInBytes", "4k"),
        ("spark.default.parallelism", "2"))


def java_available() -> bool:
    home = os.environ.get("JAVA_HOME")
    if home:
        return (Path(home) / "bin" / "java").exists()
    return shutil.which("java") is not None


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The session every Spark test shares (dpcli's own builder, test configuration)."""
    pytest.importorskip("pyspark")
    if not java_available():
        pytest.skip("Java is not installed (the Spark engine needs Java 17)")
    from dpcli.spec import SparkConfig
    from dpcli.stats.spark import spark_session

    session = spark_session(SparkConfig(master=MASTER, conf=CONF))
    yield session
    session.stop()
