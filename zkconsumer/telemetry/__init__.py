"""telemetry layer: what a long-running command shows about itself, shared by daemon and mirror.

* `zkconsumer.telemetry.http` -- `MetricsServer`: ``/metrics`` (Prometheus text) and
  ``/healthz`` on one port, in a thread; it serves whatever registry it is given.
* `zkconsumer.telemetry.progress` -- `Progress`: the ``--progress`` status line.

Below ``daemon`` and ``mirror`` (both use it) and above nothing of ours: it needs only the
standard library and prometheus_client, so neither command imports the other to show itself.
"""
