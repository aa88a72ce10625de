"""Where the typing goes when a button that has the focus is disabled: Qt hands the focus
to the next widget in the window's chain, which was the sidebar's search box, so the next
keys filtered the sidebar (issue 27, defect 4). A chat keeps it in its composer."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from PySide6.QtWidgets import QApplication, QWidget


@contextmanager
def focus_kept_in(owner: QWidget, composer: QWidget) -> Iterator[None]:
    """Around changes to owner's buttons: if the focus was in owner and they moved it out
    (or left it on a disabled widget, or on the next button along when the focused one was
    disabled), the composer gets it back."""
    before = QApplication.focusWidget()
    inside = before is not None and owner.isAncestorOf(before)
    yield
    after = QApplication.focusWidget()
    moved_on = before is not None and before is not after and not before.isEnabled()
    if inside and (after is None or not owner.isAncestorOf(after) or not after.isEnabled() or moved_on):
        composer.setFocus()
