"""What every API call shares, whichever family speaks it: the server's state (concurrency
slots, the calls in flight), a call's intake (slot, body, parse), the body's field readers,
the run of a generation call (prepare, submit, wait or stream, cancel), the Reply an API
writes its answer with, and the engine's deltas brought onto the event loop.
"""
