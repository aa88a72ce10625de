"""Equal tiles in rows of N columns, each at a position fixed by its slot alone: a tile
arriving or leaving never moves or resizes the others. (A QGridLayout re-shared its
columns by a pixel or two whenever a chart arrived, and so repainted every chart already
drawn each time the performance panel added one.)"""

from __future__ import annotations

from PySide6.QtCore import QSize
from PySide6.QtWidgets import QWidget


class Tiles(QWidget):
    def __init__(self, tile_w: int, tile_h: int, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._tile_w, self._tile_h = tile_w, tile_h
        self._slots: list[QWidget | None] = []
        self._columns = 1

    def set_slots(self, tiles: list[QWidget | None], columns: int) -> None:
        """The tiles in slot order; None keeps a slot's place for a tile still to come."""
        for tile in self._slots:
            if tile is not None and tile not in tiles:
                tile.hide()
        self._slots, self._columns = list(tiles), max(1, columns)
        for tile in tiles:
            if tile is not None and tile.parent() is not self:
                tile.setParent(self)
        self.updateGeometry()  # the scroll area around re-reads the size hints
        self._arrange()  # before showing: a tile's first paint is at its final size
        for tile in tiles:
            if tile is not None:
                tile.show()

    def set_tile_height(self, tile_h: int) -> None:
        """The least height of a row (a short panel gives its charts less)."""
        if tile_h != self._tile_h:
            self._tile_h = tile_h
            self.updateGeometry()
            self._arrange()

    def _rows(self) -> int:
        return -(-len(self._slots) // self._columns)

    def sizeHint(self) -> QSize:
        return QSize(self._columns * self._tile_w, self._rows() * self._tile_h)

    def minimumSizeHint(self) -> QSize:
        return self.sizeHint()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._arrange()

    def _arrange(self) -> None:
        rows = self._rows()
        if not rows:
            return
        w = self.width() // self._columns
        h = max(self._tile_h, self.height() // rows)  # a taller panel gives each row more
        for i, tile in enumerate(self._slots):
            if tile is not None:
                tile.setGeometry((i % self._columns) * w, (i // self._columns) * h, w, h)
