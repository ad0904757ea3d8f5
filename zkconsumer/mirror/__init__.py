"""mirror layer: copy Kafka 0.7 topics into modern Kafka (or another 0.7 cluster), losing nothing.

``zkconsumer mirror`` (`zkconsumer.mirror.cli`) runs a `Mirror` (`engine`): a 0.7 group member
(`GroupConsumer`, ``auto_ack=False``) feeding a target client (`targets.KafkaTarget` over
kafka-python, or `kafka07.Kafka07Target` over zkconsumer's confirmed producer), with an
`AckTracker` (`tracker`) deciding which offsets are safe to commit, a `Router` (`routing`)
choosing target partitions, and `verify` comparing counts afterwards.  See docs/mirror.md.
"""

from __future__ import annotations

from zkconsumer.mirror.config import MirrorConfig, Partitioning, TargetSpec
from zkconsumer.mirror.engine import Mirror
from zkconsumer.mirror.runner import build_mirror
from zkconsumer.mirror.tracker import AckTracker

__all__ = ["AckTracker", "Mirror", "MirrorConfig", "Partitioning", "TargetSpec", "build_mirror"]
