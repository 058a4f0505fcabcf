"""The durable engine: `DurableScheduler` and its parts, over a `Store`."""
