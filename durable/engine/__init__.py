"""The engine: durable's rules that need no Django (ids, hashing, errors, retries, states, replay, the graph)."""
