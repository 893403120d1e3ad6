"""Delta Lake's Spark jars: which ones match the installed wheels, where they live, and fetching them with Maven.

Neither the ``pyspark`` nor the ``delta-spark`` wheel holds Delta's JVM classes. They are two Maven artifacts:
``io.delta:delta-spark_<spark major.minor>_2.13`` (delta-spark 4.1 and later publish one per Spark line, as
``delta/pip_utils.py`` names them; older releases ``delta-spark_2.13``) and ``io.delta:delta-storage``, both
at the version of the ``delta-spark`` wheel. ``python -m deltaguard.engines.spark.jars`` copies them, once,
with ``mvn dependency:copy`` into the environment's own folder (``<sys.prefix>/delta-jars``), where every
session deltaguard creates finds them. ``DELTAGUARD_DELTA_JARS`` overrides the folder; ``none`` turns the
jars off (a Spark without Delta, as some tests need).

A jar built for another Spark line than the installed ``pyspark`` fails deep in the JVM
(``NoSuchMethodError``); :func:`check_jar_versions` says so before any session starts.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.version import Version

from deltaguard.engines.errors import SparkSetupError

DELTA_JARS_ENV = "DELTAGUARD_DELTA_JARS"
#: ``DELTAGUARD_DELTA_JARS=none``: no Delta jars at all, even when the environment's folder holds some.
DISABLED = "none"
#: Scala of the pyspark wheels: 2.13 from Spark 4, 2.12 for Spark 3.5.
SCALA_BY_SPARK_MAJOR = {3: "2.12", 4: "2.13"}
#: The Maven plugin that copies artifacts; pinned so every machine runs the same goal.
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

_JAR_NAME = re.compile(
    r"^delta-spark_(?:(?P<spark>\d+\.\d+)_)?(?P<scala>\d+\.\d+)-(?P<version>\d[\w.-]*)\.jar$"
)


def installed_version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _minor(version: str) -> str:
    """``4.2`` of an installed wheel's version (``4.2.0``, ``4.2.0.dev1``, ``4.2.0+local``: PEP 440, which
    ``packaging`` reads as pip does)."""
    parsed = Version(version)
    return f"{parsed.major}.{parsed.minor}"


def scala_binary(spark_version: str) -> str:
    """The Scala version the ``pyspark`` wheel of ``spark_version`` is built with."""
    major = Version(spark_version).major
    return SCALA_BY_SPARK_MAJOR.get(major, "2.13")


def spark_line_of_unsuffixed(delta_version: str) -> str | None:
    """The Spark line of a ``delta-spark_<scala>`` jar: Delta 3.x was built for Spark 3.5, 4.0.x for 4.0."""
    if delta_version.startswith("3."):
        return "3.5"
    if delta_version.startswith("4.0"):
        return "4.0"
    return None


def delta_artifacts(delta_version: str | None = None, spark_version: str | None = None) -> list[str]:
    """The Maven coordinates (``group:artifact:version``) of Delta's jars for the installed wheels.

    :param delta_version: delta-spark version; default: the installed ``delta-spark`` wheel.
    :param spark_version: Spark version; default: the installed ``pyspark`` wheel.
    :raises SparkSetupError: if either wheel is missing.
    """
    delta_version = delta_version or installed_version("delta-spark")
    spark_version = spark_version or installed_version("pyspark")
    if not delta_version or not spark_version:
        raise SparkSetupError("pyspark and delta-spark must be installed: airflow-provider-deltaguard[spark]")
    scala = scala_binary(spark_version)
    if Version(delta_version).release[:2] >= (4, 1):
        artifact = f"delta-spark_{_minor(spark_version)}_{scala}"
    else:
        artifact = f"delta-spark_{scala}"
    return [f"io.delta:{artifact}:{delta_version}", f"io.delta:delta-storage:{delta_version}"]


def default_jars_folder() -> Path:
    """Where the install step puts the jars: inside the Python environment, next to the wheels."""
    return Path(sys.prefix) / "delta-jars"


def jars_folder(environ: Mapping[str, str] | None = None) -> Path | None:
    """The folder sessions take Delta's jars from: ``DELTAGUARD_DELTA_JARS``, else the environment's own.

    :returns: ``None`` when the jars are turned off (``DELTAGUARD_DELTA_JARS=none``) or the environment's
        folder does not exist (nothing installed: sessions then need ``spark.jars.packages`` or a cluster
        that has Delta).
    :raises SparkSetupError: if ``DELTAGUARD_DELTA_JARS`` names something that is not a folder.
    """
    env = os.environ if environ is None else environ
    configured = env.get(DELTA_JARS_ENV, "").strip()
    if configured.lower() == DISABLED:
        return None
    if configured:
        path = Path(configured).expanduser()
        if not path.is_dir():
            raise SparkSetupError(f"{DELTA_JARS_ENV}={configured!r} is not a folder of Delta Lake jars")
        return path
    path = default_jars_folder()
    return path if path.is_dir() else None


def delta_jars(environ: Mapping[str, str] | None = None) -> list[str]:
    """The jar files sessions add to ``spark.jars`` (sorted; empty when there are none to add).

    :raises SparkSetupError: if the folder holds no jars, or jars built for another Spark line.
    """
    folder = jars_folder(environ)
    if folder is None:
        return []
    jars = sorted(str(p.resolve()) for p in folder.glob("*.jar"))
    if not jars:
        raise SparkSetupError(
            f"{folder} holds no *.jar files; run `make delta-jars` (or unset {DELTA_JARS_ENV})"
        )
    check_jar_versions(jars)
    return jars


@dataclass(frozen=True)
class JarBuild:
    """What a ``delta-spark`` jar's file name says it was built for."""

    delta_version: str
    spark_line: str | None  # ``4.2``; ``None`` for the un-suffixed artifact (delta-spark 4.0: Spark 4.0)
    scala: str


def jar_build(jar: str) -> JarBuild | None:
    """Parse ``delta-spark_4.2_2.13-4.4.0.jar`` (``None`` for other jars)."""
    match = _JAR_NAME.match(Path(jar).name)
    if match is None:
        return None
    return JarBuild(match["version"], match["spark"], match["scala"])


def check_jar_versions(jars: Sequence[str], spark_version: str | None = None) -> None:
    """Refuse jars that cannot work with this ``pyspark``: another Spark line or Scala version.

    ``delta-spark_<scala>`` jars: Delta 3.x was built for Spark 3.5, 4.0.x for Spark 4.0; later releases name
    their Spark line.
    A Delta version differing from the ``delta-spark`` wheel's is refused too: the Python API calls JVM
    methods of its own release.

    :raises SparkSetupError: naming the jar, what it was built for, and the installed versions.
    """
    spark_version = spark_version or installed_version("pyspark") or ""
    wheel = installed_version("delta-spark")
    builds = [(jar, jar_build(jar)) for jar in jars]
    found = [(jar, build) for jar, build in builds if build is not None]
    if not found:
        raise SparkSetupError(f"no delta-spark_*.jar among {list(jars)}")
    for jar, build in found:
        line = build.spark_line or spark_line_of_unsuffixed(build.delta_version)
        problems = []
        if line is not None and spark_version and _minor(spark_version) != line:
            problems.append(f"it was built for Spark {line}, pyspark is {spark_version}")
        expected_scala = scala_binary(spark_version) if spark_version else build.scala
        if build.scala != expected_scala:
            problems.append(
                f"it was built for Scala {build.scala}, pyspark {spark_version} uses {expected_scala}"
            )
        if wheel and build.delta_version != wheel:
            problems.append(f"it is Delta {build.delta_version}, the delta-spark wheel is {wheel}")
        if problems:
            raise SparkSetupError(
                f"Delta jar {Path(jar).name} does not match this Python environment: {'; '.join(problems)}. "
                f"Fetch the matching jars ({', '.join(delta_artifacts())}) with `make delta-jars`."
            )


def fetch(folder: Path, *, mvn: str = "mvn", artifacts: Sequence[str] | None = None) -> list[Path]:
    """Copy Delta's jars for the installed wheels into ``folder`` with Maven (``dependency:copy``).

    Jars already there are kept; stale ``delta-*`` jars of other versions are removed first.

    :param folder: the destination (created).
    :param mvn: the Maven executable.
    :param artifacts: coordinates to copy; default :func:`delta_artifacts`.
    :raises SparkSetupError: when Maven is missing or fails (its own error text included).
    """
    artifacts = list(artifacts or delta_artifacts())
    wanted = {f"{a.split(':')[1]}-{a.split(':')[2]}.jar" for a in artifacts}
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("delta-*.jar"):
        if old.name not in wanted:
            old.unlink()
    if shutil.which(mvn) is None:
        raise SparkSetupError(f"Maven ({mvn}) is not installed; it fetches {', '.join(artifacts)}")
    for artifact in artifacts:
        name = f"{artifact.split(':')[1]}-{artifact.split(':')[2]}.jar"
        if (folder / name).exists():
            continue
        command = [
            mvn,
            "-q",
            "-B",
            f"{DEPENDENCY_PLUGIN}:copy",
            f"-Dartifact={artifact}",
            f"-DoutputDirectory={folder}",
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not (folder / name).exists():
            raise SparkSetupError(
                f"Maven could not fetch {artifact} (exit {done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
            )
    return sorted(folder / name for name in wanted)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fetch Delta Lake's Spark jars for the installed wheels.")
    parser.add_argument("--dest", type=Path, default=default_jars_folder(), help="folder for the jars")
    parser.add_argument("--mvn", default="mvn", help="the Maven executable")
    args = parser.parse_args(argv)
    try:
        jars = fetch(args.dest, mvn=args.mvn)
        check_jar_versions([str(j) for j in jars])
    except SparkSetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for jar in jars:
        print(jar)
    return 0


if __name__ == "__main__":
    sys.exit(main())
