"""Chat storage (SQLite through SQLAlchemy). Imports no Qt and no engine.

Not built yet: see the storage issue.
"""
