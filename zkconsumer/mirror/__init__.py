"""mirror layer: copy Kafka 0.7 topics into modern Kafka (or another 0.7 cluster), and modern
Kafka topics back into 0.7, losing nothing.

``zkconsumer mirror`` (`zkconsumer.mirror.cli`) runs one of three engines on one runtime
(`runtime`: stop, retry with backoff, fatal errors; `lanes`: the state machine of an owned
source partition; `serve`: signals, ``--progress``, ``/metrics``):

* for a ``kafka://`` target, an `ExactlyOnceMirror` (`exactly_once`, `eos_lane`, `eos_claim`):
  a 0.7 group member writing each source partition in transactions of confluent-kafka
  producers, with its position checkpointed in the same transaction (`checkpoints`);
* with ``--at-least-once`` or a ``kafka07://`` target, a `Mirror` (`engine`): the group member
  (``auto_ack=False``) feeding a target client (`targets.KafkaTarget` over confluent-kafka, or
  `kafka07.Kafka07Target` over zkconsumer's confirmed producer) run by run, with an
  `AckTracker` (`tracker`) deciding which offsets are safe to commit;
* with ``--from kafka://``, the `Bridge` (`bridge`, `bridge_target`, `bridge_cli`,
  `pipeline`): a confluent-kafka group member on the modern cluster writing into 0.7 under
  ZooKeeper checkpoints, exactly once where it is the only writer.

A `Router` (`routing`) chooses target partitions, `loopguard` keeps the two directions from
copying each other's records back, `verify` compares counts afterwards, `reader` reads target
partitions back.  See docs/mirror.md.
"""

from __future__ import annotations

from zkconsumer.mirror.config import MirrorConfig, Partitioning, TargetSpec
from zkconsumer.mirror.engine import Mirror
from zkconsumer.mirror.exactly_once import ExactlyOnceMirror
from zkconsumer.mirror.runner import build_mirror
from zkconsumer.mirror.tracker import AckTracker

__all__ = ["AckTracker", "ExactlyOnceMirror", "Mirror", "MirrorConfig", "Partitioning", "TargetSpec", "build_mirror"]
