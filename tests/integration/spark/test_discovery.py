"""PySpark finds the ``kafka07`` source by itself under the README's install (issue 13 item 2).

PySpark registers Python data sources by running ``lookup_data_sources._main`` in a fresh
Python worker: ``pkgutil.iter_modules()`` over ``sys.path``, every ``pyspark_*`` module with a
``DefaultSource``.  Modules that setuptools' editable finder serves are invisible to
``iter_modules``, so this runs PySpark's own lookup in a clean interpreter -- no
``PYTHONPATH``, working directory outside the checkout -- exactly as a worker would.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

LOOKUP = """
import io, struct
from pyspark.sql.worker.lookup_data_sources import _main
out = io.BytesIO()
_main(io.BytesIO(), out)
data = out.getvalue()
count = struct.unpack(">i", data[:4])[0]
names, pos = [], 4
for _ in range(count):
    n = struct.unpack(">i", data[pos:pos + 4])[0]
    names.append(data[pos + 4:pos + 4 + n].decode())
    pos += 4 + n
    pos += 4 + struct.unpack(">i", data[pos:pos + 4])[0]
import importlib.metadata, pyspark_kafka07
# one zkconsumer distribution: no egg-info of a build directory on sys.path
dists = [d for d in importlib.metadata.distributions() if d.metadata["Name"] == "zkconsumer"]
assert len(dists) == 1, [str(getattr(d, "_path", d)) for d in dists]
print(" ".join(names), pyspark_kafka07.DefaultSource.__module__)
"""


def test_pyspark_lookup_finds_kafka07_without_path_tricks(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", LOOKUP], cwd=tmp_path, env=env, timeout=60,
                         capture_output=True, text=True, check=True).stdout.split()
    assert "kafka07" in out[:-1]
    assert out[-1] == "zkconsumer.spark.source"  # pickled by reference: executors import it
