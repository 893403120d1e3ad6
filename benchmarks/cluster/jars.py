"""The Hadoop S3A jars the Spark cluster needs to write ``s3://`` tables (not in the pyspark wheel).

``hadoop-aws`` must match the wheel's Hadoop (``hadoop-client-api-3.5.0.jar``); Maven resolves the AWS SDK
bundle it was built against. ``make cluster-jars`` copies them once into ``.venv/s3-jars``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

HADOOP_AWS = "org.apache.hadoop:hadoop-aws:3.5.0"

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>deltaguard.cluster</groupId><artifactId>s3-jars</artifactId><version>1</version>
<dependencies><dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId><version>{version}</version>
<exclusions><exclusion><groupId>org.apache.hadoop</groupId><artifactId>*</artifactId></exclusion></exclusions>
</dependency></dependencies></project>
"""


def jars_folder() -> Path:
    """``$DELTAGUARD_S3_JARS``, else ``<sys.prefix>/s3-jars``."""
    return Path(os.environ.get("DELTAGUARD_S3_JARS") or Path(sys.prefix) / "s3-jars")


def s3_jars() -> list[Path]:
    """The jars in :func:`jars_folder`; raise naming the make target when there are none."""
    jars = sorted(jars_folder().glob("*.jar"))
    if not any(j.name.startswith("hadoop-aws-") for j in jars):
        raise RuntimeError(f"no hadoop-aws jar in {jars_folder()}: run `make cluster-jars`")
    return jars


def fetch(dest: Path | None = None) -> list[Path]:
    """Copy ``hadoop-aws`` and its runtime dependencies (Hadoop's own excluded: the wheel has them)."""
    # absolute: Maven runs in a temporary directory, where a relative folder would be made (and removed)
    dest = (dest or jars_folder()).resolve()
    dest.mkdir(parents=True, exist_ok=True)
    group, artifact, version = HADOOP_AWS.split(":")
    with tempfile.TemporaryDirectory() as work:
        (Path(work) / "pom.xml").write_text(_POM.format(group=group, artifact=artifact, version=version))
        subprocess.run(
            [
                "mvn",
                "-q",
                "-B",
                "dependency:copy-dependencies",
                f"-DoutputDirectory={dest}",
                "-DincludeScope=runtime",
            ],
            cwd=work,
            check=True,
            timeout=1800,
        )
    return sorted(dest.glob("*.jar"))


if __name__ == "__main__":
    for jar in fetch(Path(sys.argv[1]) if len(sys.argv) > 1 else None):
        print(jar)
