"""Qt widgets and item models. Talks to app-level services only.

Not built yet: see the desktop app issue.
"""
