"""worker: run coding agents on a queue of tasks, unattended."""

import os

__version__ = "0.1.0"

# pydantic looks for plugins in every installed package's entry points when it builds its
# first model: importlib.metadata and a scan, about 20 ms on every command. worker uses no
# pydantic plugin. The switch is pydantic's own environment variable, set when the operator
# has not set it, with a mark saying it is worker's (a `worker serve` started by `worker
# supervise` inherits both). `worker.proc.child_env` removes the two again, so the agents and
# the projects they test see the environment worker was started with.
PYDANTIC_SWITCH = ("PYDANTIC_DISABLE_PLUGINS", "PYDANTIC_DISABLE_PLUGINS_SET_BY_WORKER")
if PYDANTIC_SWITCH[0] not in os.environ or PYDANTIC_SWITCH[1] in os.environ:
    os.environ.update(dict.fromkeys(PYDANTIC_SWITCH, "__all__"))
