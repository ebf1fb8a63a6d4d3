"""Every order waiting to be obeyed, from every place one can be given.

`worker.kernel.control` holds what an order is and how each is read, written and consumed;
this module gathers them: the control folder, the inbox and the intercom always, then the
hooks this configuration turns on (GitHub comments with `[github] repos`, the fleet's orders
with `[fleet] database_url`), then any hook registered with `control.register_hook`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from worker.config import Settings
from worker.kernel import control, intercom_orders
from worker.kernel.model import ControlOrder

log = logging.getLogger(__name__)


def read_orders(
    settings: Settings, approvers: list[str] | None = None, *, dry_run: bool = False
) -> list[ControlOrder]:
    """Every order waiting to be obeyed: the control folder, the inbox, the intercom, the
    hooks (not in a dry run: a hook keeps cursors, and a dry run writes nothing)."""
    listed = settings.waits.approvers if approvers is None else approvers
    orders = control.from_control_dir(settings)
    orders += control.from_inbox(settings, listed)
    orders += intercom_orders.read(settings, listed)
    if dry_run:
        return orders
    for factory in hooks(settings):
        try:
            orders += factory(settings).orders()
        except Exception as exc:  # a broken hook must not hide the other orders
            log.warning("control hook failed: %s", exc)
    return orders


def hooks(settings: Settings) -> list[Callable[[Settings], control.ControlHook]]:
    """The built-in hooks this configuration turns on, then the registered ones."""
    built_in: list[Callable[[Settings], control.ControlHook]] = []
    # Imported here, as the sources do: a run without GitHub loads no GitHub code (nor
    # tenacity), and psycopg takes about 100 ms to import, which only a fleet needs.
    if settings.github.repos:
        from worker.kernel.github_hook import GitHubControl

        built_in.append(GitHubControl)
    if settings.fleet.enabled:
        from worker.fleet.orders import FleetOrders

        built_in.append(FleetOrders)
    return built_in + [factory for factory in control.HOOKS if factory not in built_in]
