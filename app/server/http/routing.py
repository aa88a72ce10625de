"""A route as this server declares them, for the assembly and every family's door."""

from __future__ import annotations

from starlette.routing import Route


def route(path: str, endpoint, *methods: str) -> Route:
    declared = Route(path, endpoint, methods=list(methods))
    # Starlette answers HEAD wherever GET is allowed; this API has no use for it (405).
    declared.methods = set(methods)
    return declared
