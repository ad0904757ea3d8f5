"""``zkconsumer run``: a consumer-group member that hands every message to your code.

Modules: `config` (flags + 0.7 properties -> `DaemonConfig`), `formats` (batch encoders),
`tracker` (acknowledgements between sink and consumer), `sinks` (file, exec, handler, dead
letters), `runner` (`Daemon`: the loop, rebalance hooks, shutdown), `metrics` (Prometheus +
/healthz), `progress` (the live status line), `cli` (argument parsing, logging, signals).
Operator documentation: docs/operations.md.
"""
