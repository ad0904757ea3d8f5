"""Deterministic simulation of a 0.7 consumer group (issue 18 §2).

The group's members -- the real `zkconsumer.consumer` member machine, run unchanged by an
executor, and a model of Scala 0.7.2's ``ZookeeperConsumerConnector`` -- run against an
in-memory ZooKeeper (`zk`, `client`), brokers that are log ends (`world`) and seeded
faults (`faults`), in simulated time from one seed (`loop`).  Invariants (`invariants`) are
checked as the state they speak about changes; `run.run_schedule` runs one seed and
`batch.run_many` thousands.  No threads, no sockets, no wall clock: a failing seed replays
exactly, with a printable trace.
"""
