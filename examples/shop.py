"""A shop the agent must operate in order: add the ordered items to a cart, then check out.

Each episode gets its own `ShopEnv` (its own stock and cart). The reward reads the
receipt the last successful ``checkout`` returned, the shop's final state, and compares
it with the record's ``order`` column: 1.0 for the exact order, 0.2 for a checkout of
anything else, 0.0 without a checkout.

    python examples/shop.py runs/shop.jsonl            # write 200 orders
    agentrl train --data runs/shop.jsonl \\
        --environment examples.shop:ShopEnv --reward_funcs examples.shop:reward
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any

PRICES = {"apple": 0.5, "pen": 1.25, "notebook": 3.0, "mug": 6.5, "battery": 2.0}
STOCK = 5  # of each item, in every episode's shop


class ShopEnv:
    """One episode's shop: stock, a cart and whether the cart was paid."""

    def __init__(self) -> None:
        self.stock = dict.fromkeys(PRICES, STOCK)
        self.cart: dict[str, int] = {}
        self.paid = False
        self.tools = [self.add_to_cart, self.view_cart, self.checkout]

    def reset(self, sample: Any) -> str:
        return "The shop is open. Items: " + ", ".join(sorted(PRICES)) + "."

    def add_to_cart(self, item: str, quantity: int) -> dict[str, Any]:
        """Put ``quantity`` of ``item`` into the cart.

        Args:
            item: the item's name, e.g. apple
            quantity: how many, at least 1
        """
        if self.paid:
            raise ValueError("the cart is already paid")
        if item not in self.stock:
            raise ValueError(f"no such item: {item}")
        if quantity < 1 or quantity > self.stock[item]:
            raise ValueError(f"quantity must be 1..{self.stock[item]}")
        self.stock[item] -= quantity
        self.cart[item] = self.cart.get(item, 0) + quantity
        return {"cart": dict(self.cart)}

    def view_cart(self) -> dict[str, Any]:
        """The items in the cart and their total price."""
        return {"cart": dict(self.cart), "total": self._total()}

    def checkout(self) -> dict[str, Any]:
        """Pay for the cart; returns the receipt."""
        if not self.cart:
            raise ValueError("the cart is empty")
        self.paid = True
        return {"receipt": dict(self.cart), "total": self._total()}

    def _total(self) -> float:
        return round(sum(PRICES[item] * n for item, n in self.cart.items()), 2)

    def close(self) -> None:
        self.cart.clear()


def reward(completions: list[str], order: list[dict[str, int]], **kwargs: Any) -> list[float]:
    """1.0 when the last receipt equals the order, 0.2 for another receipt, else 0.0."""
    out = []
    for trajectory, wanted in zip(kwargs["trajectories"], order, strict=True):
        receipts = [
            event.result["receipt"]
            for event in trajectory.tool_events
            if event.ok and event.name == "checkout"
        ]
        if not receipts:
            out.append(0.0)
        else:
            out.append(1.0 if receipts[-1] == wanted else 0.2)
    return out


def write_data(path: str, n: int = 200, seed: int = 0) -> None:
    """``n`` orders of one or two items as prompt-pool JSONL (``order`` and ``gt`` columns)."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for _ in range(n):
            items = rng.sample(sorted(PRICES), rng.randint(1, 2))
            order = {item: rng.randint(1, 3) for item in items}
            wanted = " and ".join(f"{k} x{v}" for k, v in order.items())
            record = {
                "messages": [
                    {"role": "system", "content": "You run errands in a shop with its tools."},
                    {"role": "user", "content": f"Buy {wanted}, then check out."},
                ],
                "order": order,
                "gt": [json.dumps(order, sort_keys=True)],
            }
            handle.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    write_data(sys.argv[1] if len(sys.argv) > 1 else "shop.jsonl")
