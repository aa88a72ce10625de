"""Errors raised by the engine. Each one carries a message a user can act on."""


class EngineError(RuntimeError):
    """The engine as a whole cannot go on (not loaded, shut down, crashed)."""


class ModelLoadError(EngineError):
    """A model file could not be loaded: missing, not GGUF, truncated or unsupported."""


class RequestError(ValueError):
    """One request is invalid (bad parameters, prompt longer than the context).

    It ends that request alone; every other request goes on.
    """
