"""Composition root: configuration, command line and wiring of engine, storage and UI."""
