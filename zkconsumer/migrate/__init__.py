"""migrate layer: tools for moving data and consumer state off a Kafka 0.7 cluster.

* `zkconsumer.migrate.offsets` -- export / import / reset of consumer-group offsets in
  ZooKeeper (ExportZkOffsets, ImportZkOffsets, UpdateOffsetsInZK, validated and safe);
* ``offsets_cli`` / ``logdir_cli`` -- the ``zkconsumer offsets`` and ``zkconsumer logdir``
  commands (the segment-file reader under ``logdir`` is `zkconsumer.client.logdir`).  The Spark export lives in `zkconsumer.spark`.  See docs/migration.md.
"""
