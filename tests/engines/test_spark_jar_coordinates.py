"""Delta's Maven coordinates for the installed wheels, whatever PEP 440 shape their versions take."""

from __future__ import annotations

import pytest

from deltaguard.engines.spark.jars import delta_artifacts, scala_binary


@pytest.mark.parametrize(
    ("delta", "spark", "artifact"),
    [
        ("4.4.0", "4.2.0", "delta-spark_4.2_2.13"),
        ("4.4.0rc1", "4.2rc1", "delta-spark_4.2_2.13"),  # a pre-release without a patch number
        ("4.4.0", "4.2.0.dev1+local", "delta-spark_4.2_2.13"),
        ("4.0.0", "4.0.1", "delta-spark_2.13"),  # before 4.1 the jar names no Spark line
        ("3.2.1", "3.5.3", "delta-spark_2.12"),
    ],
)
def test_coordinates_follow_the_wheels(delta: str, spark: str, artifact: str) -> None:
    assert delta_artifacts(delta, spark) == [
        f"io.delta:{artifact}:{delta}",
        f"io.delta:delta-storage:{delta}",
    ]


def test_scala_follows_the_spark_major() -> None:
    assert (scala_binary("3.5.3"), scala_binary("4.2rc1")) == ("2.12", "2.13")
