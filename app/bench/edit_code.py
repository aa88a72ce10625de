"""The Python file the edit workload asks the model to repeat with a class renamed: written
for the benchmark (a fixed text, not a file of the tree that changes), and one the default
small model repeats."""

EDIT_CODE = r'''"""A small inventory of items with prices and stock counts."""

from dataclasses import dataclass, field


@dataclass
class Item:
    name: str
    price: float
    stock: int = 0

    def value(self) -> float:
        """The value of the stock of this item."""
        return self.price * self.stock


@dataclass
class Inventory:
    items: dict[str, Item] = field(default_factory=dict)

    def add(self, name: str, price: float, stock: int = 0) -> Item:
        """Add an item, or more stock of an item already there."""
        item = self.items.get(name)
        if item is None:
            item = Item(name, price, stock)
            self.items[name] = item
        else:
            item.stock += stock
        return item

    def remove(self, name: str, count: int) -> None:
        """Take count units of an item out of the stock."""
        item = self.items[name]
        if count > item.stock:
            raise ValueError(f"only {item.stock} of {name} in stock")
        item.stock -= count

    def total_value(self) -> float:
        """The value of everything in stock."""
        return sum(item.value() for item in self.items.values())

    def cheapest(self) -> Item | None:
        """The item with the lowest price, if there is one."""
        return min(self.items.values(), key=lambda item: item.price, default=None)

    def in_stock(self) -> list[Item]:
        """The items with at least one unit in stock, by name."""
        return sorted((item for item in self.items.values() if item.stock > 0), key=lambda item: item.name)


def report(inventory: Inventory) -> str:
    """One line per item in stock, then the total."""
    lines = [f"{item.name}: {item.stock} at {item.price:.2f}" for item in inventory.in_stock()]
    lines.append(f"total: {inventory.total_value():.2f}")
    return "\n".join(lines)


def main() -> None:
    inventory = Inventory()
    inventory.add("apple", 0.5, 40)
    inventory.add("pear", 0.75, 25)
    inventory.add("plum", 0.3, 60)
    inventory.remove("apple", 10)
    print(report(inventory))


if __name__ == "__main__":
    main()
'''
