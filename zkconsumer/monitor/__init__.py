"""``zkconsumer monitor``: every 0.7 consumer group at a glance (issue 20).

* `sampler` -- one poll of ZooKeeper (pipelined reads) and the brokers' log ends;
* `evaluator` -- Burrow's rules over a window of samples (pure);
* `store` -- the sample windows, in memory and optionally in SQLite;
* `service` -- the polling loop that publishes `MonitorState`;
* `server` / `metrics` / `notifier` -- the page and JSON API, Prometheus, webhooks;
* `cli` -- the command; ``static/`` -- the page's HTML, JS and CSS (package data).
"""
