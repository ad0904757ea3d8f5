"""devcluster layer of zkconsumer (see docs/architecture.md)."""
