"""zkconsumer: Kafka 0.7 clients and tools for ZooKeeper-coordinated clusters.

Layers (dependencies point one way): ``protocol`` (sans-I/O codec) <- ``client`` (sockets)
<- ``producer`` / ``consumer`` <- ``daemon`` / ``spark`` / ``migrate`` / ``mirror``;
``zk`` (ZooKeeper layout) needs only kazoo; ``broker`` (the dev broker) uses ``protocol``
and ``zk``.  See docs/architecture.md.
"""

__version__ = "0.1.0"
