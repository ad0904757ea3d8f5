"""mirror layer: copy Kafka 0.7 topics into modern Kafka (or another 0.7 cluster), losing nothing.

``zkconsumer mirror`` (`zkconsumer.mirror.cli`) runs, for a ``kafka://`` target, an
`ExactlyOnceMirror` (`exactly_once`): a 0.7 group member writing each source partition in
transactions of confluent-kafka producers, with its position checkpointed in the same
transaction (`checkpoints`).  With ``--at-least-once`` or a ``kafka07://`` target it runs a
`Mirror` (`engine`): the group member (``auto_ack=False``) feeding a target client
(`targets.KafkaTarget` over confluent-kafka, or `kafka07.Kafka07Target` over zkconsumer's
confirmed producer), with an `AckTracker` (`tracker`) deciding which offsets are safe to
commit.  A `Router` (`routing`) chooses target partitions, `verify` compares counts
afterwards, `reader` reads target partitions back.  See docs/mirror.md.
"""

from __future__ import annotations

from zkconsumer.mirror.config import MirrorConfig, Partitioning, TargetSpec
from zkconsumer.mirror.engine import Mirror
from zkconsumer.mirror.exactly_once import ExactlyOnceMirror
from zkconsumer.mirror.runner import build_mirror
from zkconsumer.mirror.tracker import AckTracker

__all__ = ["AckTracker", "ExactlyOnceMirror", "Mirror", "MirrorConfig", "Partitioning", "TargetSpec", "build_mirror"]
