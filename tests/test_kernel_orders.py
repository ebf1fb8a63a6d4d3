"""`kernel.orders.read_orders`: every order from every channel, the hooks turned on by the
configuration, and a broken hook hiding nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from worker.config import Settings, load_settings
from worker.kernel import control
from worker.kernel.model import ControlOrder, Order
from worker.kernel.orders import hooks, read_orders


class OneOrder:
    """A hook (a chat bot, say) with one order to give."""

    asked = 0

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def orders(self) -> list[ControlOrder]:
        OneOrder.asked += 1
        return [
            ControlOrder("chat-1", Order.PAUSE, "msg-7", "chat", "lunch", "carol", ref=(self, 1))
        ]

    def consume(self, handle: Any, outcome: str) -> None:
        pass


class Broken(OneOrder):
    def __init__(self, settings: Settings) -> None:
        raise RuntimeError("chat API down")


def test_a_registered_hook_joins_the_files_and_a_broken_one_hides_nothing(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The control folder's order and the hook's both come back, with the broken hook named
    in a warning; a dry run asks no hook (a hook keeps cursors)."""
    monkeypatch.setattr(control, "HOOKS", [])
    control.register_hook(Broken)
    control.register_hook(OneOrder)
    control.register_hook(OneOrder)  # once is enough
    settings = load_settings(workspace, env={})
    control.write_order(settings, "msg-3", Order.CANCEL, "not needed", "alice")
    found = {(o.origin, o.order, o.task_id) for o in read_orders(settings)}
    assert found == {("cli", Order.CANCEL, "msg-3"), ("chat", Order.PAUSE, "msg-7")}
    assert "control hook failed: chat API down" in caplog.text
    OneOrder.asked = 0
    assert [o.origin for o in read_orders(settings, dry_run=True)] == ["cli"]
    assert OneOrder.asked == 0


def test_the_built_in_hooks_follow_the_configuration(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No GitHub or fleet hook without `[github] repos` or a fleet database; with them, GitHub
    comes first, then the fleet, then the registered hooks."""
    monkeypatch.setattr(control, "HOOKS", [OneOrder])
    alone = load_settings(workspace, env={})
    assert hooks(alone) == [OneOrder]
    both = load_settings(
        workspace,
        env={},
        github={"repos": ["octo/repo"]},
        fleet={"database_url": "postgresql://fleet@127.0.0.1:1/worker"},
    )
    names = [factory.__name__ for factory in hooks(both)]
    assert names == ["GitHubControl", "FleetOrders", "OneOrder"]
