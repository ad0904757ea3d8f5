"""The ZooKeeper layer: Kafka 0.7's znode layout, formats and zkclient semantics on kazoo.

* `zkconsumer.zk.paths` -- every path and value format (pure, byte-exact with Scala 0.7.2);
* `zkconsumer.zk.session` -- `ZkSession`: connect, create/update/read/delete with zkclient
  semantics (null-data parents, ephemeral-conflict rules); kazoo errors are translated;
* `zkconsumer.zk.watch` -- child watches that survive missing paths and session expiry;
* `zkconsumer.zk.registry` -- cluster and group reads (brokers, topics, members, owners);
* `zkconsumer.zk.offsets` -- group offsets (read, commit, export).

Only this package imports kazoo; nothing else in zkconsumer sees a kazoo exception.
"""
