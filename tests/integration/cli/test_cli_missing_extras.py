"""A missing optional extra is one line naming what to install -- never "a bug".

With the base package only, ``zkconsumer mirror --to kafka://...`` used to end with
``unexpected ModuleNotFoundError: No module named 'confluent_kafka' (a bug: please report
it ...)``.  Each case runs the real command in a fresh interpreter in which the extra's
modules cannot be imported (``sys.modules[name] = None``: exactly what ``import`` sees when a
package is not installed), instead of building a venv without the extras.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from zkconsumer.errors import MissingExtraError
from zkconsumer.extras import from_import_error

ROOT = Path(__file__).resolve().parents[3]

_WITHOUT = """\
import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None  # "not installed"
{body}
"""
_CLI = "from zkconsumer.cli import main\nsys.exit(main(sys.argv[2:]))"


def _run(missing: str, body: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _WITHOUT.format(body=body), missing, *argv],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def _one_line_error(result: subprocess.CompletedProcess[str], command: str, extra: str,
                    module: str) -> None:
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "bug" not in result.stderr, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"zkconsumer {command}: error: "), result.stderr
    assert last.endswith(f"needs the optional {extra!r} extra (no module named {module!r}): "
                         f"pip install 'zkconsumer[{extra}]'"), last


def test_mirror_to_kafka_without_the_mirror_extra(zk_connect: str) -> None:
    result = _run("confluent_kafka", _CLI, "mirror", "--zk", zk_connect, "--group", "g",
                  "--topic", "t", "--to", "kafka://127.0.0.1:9")
    _one_line_error(result, "mirror", "mirror", "confluent_kafka")


def test_mirror_translate_without_the_mirror_extra(zk_connect: str) -> None:
    result = _run("confluent_kafka", _CLI, "mirror", "translate", "--zk", zk_connect,
                  "--group", "g", "--mirror-group", "m", "--to", "kafka://127.0.0.1:9",
                  "--target-group", "x")
    _one_line_error(result, "mirror", "mirror", "confluent_kafka")
    assert "zkconsumer mirror translate needs" in result.stderr


@pytest.mark.parametrize("missing", ["pyspark", "pyarrow"])
def test_export_without_the_spark_extra(tmp_path: Path, missing: str) -> None:
    result = _run(missing, _CLI, "export", "--brokers", "0:127.0.0.1:9", "--topic", "t",
                  "--to", str(tmp_path / "out"))
    _one_line_error(result, "export", "spark", missing)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("case", "missing", "extra"), [("export", "pyspark", "spark"),
                                                         ("mirror", "confluent_kafka", "mirror")])
def test_bench_cases_without_their_extra(case: str, missing: str, extra: str) -> None:
    _one_line_error(_run(missing, _CLI, "bench", case), "bench", extra, missing)


def test_spark_api_without_the_spark_extra() -> None:
    body = """\
from zkconsumer.errors import MissingExtraError
import zkconsumer.spark
from zkconsumer.spark.session import build_session
for call in (lambda: zkconsumer.spark.register(object()), lambda: build_session("local[1]")):
    try:
        call()
    except MissingExtraError as exc:
        print(exc)
"""
    result = _run("pyspark,pyarrow", body)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "the kafka07 data source needs the optional 'spark' extra (no module named 'pyspark'): "
        "pip install 'zkconsumer[spark]'",
        "a Spark session needs the optional 'spark' extra (no module named 'pyspark'): "
        "pip install 'zkconsumer[spark]'"]


def test_only_the_modules_of_an_extra_count() -> None:
    """A missing module of our own (or of a base dependency) stays a bug report."""
    exc = from_import_error(ModuleNotFoundError("No module named 'pyarrow.parquet'",
                                                name="pyarrow.parquet"))
    assert isinstance(exc, MissingExtraError) and isinstance(exc, ImportError)
    assert (exc.extra, exc.module) == ("spark", "pyarrow")
    assert from_import_error(ModuleNotFoundError("x", name="zkconsumer.nothing")) is None
    assert from_import_error(ModuleNotFoundError("x", name="kazoo")) is None
    assert from_import_error(ImportError("cannot import name 'x'", name="pyspark")) is None
