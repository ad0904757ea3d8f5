"""Auto-registration shim: installed as the TOP-LEVEL module ``pyspark_kafka07``.

At the first Python data-source call, PySpark imports every top-level module whose name starts
with ``pyspark_`` and registers its ``DefaultSource`` under ``DefaultSource.name()``
(pyspark/sql/worker/lookup_data_sources.py).  With zkconsumer installed, this file makes
``spark.read.format("kafka07")`` work with no ``spark.dataSource.register`` call.

It lives alone in ``zkconsumer/spark/shim/`` (a plain directory, not a package) so it is
versioned with the source; the build maps it to a top-level module, and for editable installs
``.ci/setup`` puts a link to it on ``sys.path`` (a directory in ``.venv`` named by a ``.pth``
path entry), because ``pkgutil.iter_modules`` cannot see modules served by setuptools'
editable finder (see docs/spark.md, "Installation").  Importing it must stay cheap and free
of side effects: PySpark imports it in every planner worker.
"""

from __future__ import annotations

from zkconsumer.spark.source import Kafka07DataSource as DefaultSource

__all__ = ["DefaultSource"]
