"""Errors raised by the engine. Each one carries a message a user can act on."""


class EngineError(RuntimeError):
    """The engine as a whole cannot go on (not loaded, shut down, crashed)."""


class ModelLoadError(EngineError):
    """A model file could not be loaded: missing, not GGUF, truncated or unsupported."""


class RequestError(ValueError):
    """One request is invalid (bad parameters, prompt longer than the context).

    It ends that request alone; every other request goes on.
    """


class SchemaError(RequestError):
    """A schema (or grammar) that cannot be enforced. keyword: the one at fault; path: where
    it is in the schema, as a JSON-pointer-like suffix ("" for the top, ".properties.age")."""

    def __init__(self, keyword: str, path: str, reason: str) -> None:
        super().__init__(f"{keyword} at {path or 'the top'} {reason}")
        self.keyword, self.path, self.reason = keyword, path, reason
