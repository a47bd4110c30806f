"""How a Prefect server on Redis messaging publishes: each event at once, never by prefect-redis's timer.

prefect-redis 0.3.0's ``Publisher`` (``prefect_redis/messaging.py``) keeps a
batch (``batch_size``, default 5) and also publishes it from a timer task
every ``publish_every`` (default 10 s). ``_publish_current_batch`` awaits the
de-duplication cache (a Redis pipeline) *before* it clears the batch list, so
an event the server's websocket handler (``/api/events/in``, one publisher a
connection: a flow-run process's events) appends during that await is
cleared without ever being published: no error, no log line. When it was a
task run's Completed event, the task run stays Running in the record for good
(docs/BENCHMARKS.md, "The cluster's messaging on Redis": 3 of 4,028).

A batch of one alone does not close it (the timer can still clear an event
the handler appended while the timer awaited); with the timer pushed past any
server's life as well, only the handler touches the batch, one event at a time.
The cost is one de-duplication round trip to Redis for each event instead of
one for five.
"""

from __future__ import annotations

#: prefect-redis's ``RedisMessagingPublisherSettings`` for every server process whose messaging is on Redis:
#: publish each event as it arrives (batch of one), and the periodic publish every 10**9 s (about 31 years),
#: that is never. The value is whole seconds: prefect-redis reads a string with ``int()``.
REDIS_PUBLISHER_SETTINGS = {"PREFECT_REDIS_MESSAGING_PUBLISHER_BATCH_SIZE": "1",
                            "PREFECT_REDIS_MESSAGING_PUBLISHER_PUBLISH_EVERY": str(10**9)}
