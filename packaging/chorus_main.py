"""Entry point of the frozen desktop bundle (PyInstaller runs this file as __main__).

The engine runs in a `spawn` multiprocessing child. In a frozen app that child is this same
executable started again with multiprocessing's arguments: freeze_support() must run first
and turn it into the child, or the child would run the whole CLI (and open another window).
"""

import multiprocessing
import sys

if __name__ == "__main__":
    multiprocessing.freeze_support()
    from app.cli.main import main

    sys.exit(main())
