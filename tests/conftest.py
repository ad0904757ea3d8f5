"""Root test configuration: loads the fixture plugins every test directory may use.

Each plugin lives in ``tests/fixtures/`` (on ``sys.path`` via ``pythonpath`` in
pyproject.toml) and owns one kind of real component: ZooKeeper, dev brokers, Spark.
"""

pytest_plugins = [
    "fixtures.waiting",
    "fixtures.zookeeper",
    "fixtures.brokers",
    "fixtures.spark",
    "fixtures.tansu",
    "fixtures.proxy",
]
