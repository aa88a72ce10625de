"""The Models window's controller (window.py) and those of its two tabs, which it builds:
Discover, the Hub's search (discover.py), and the Library (library.py)."""
