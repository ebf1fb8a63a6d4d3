"""worker's command line.

pydantic looks for plugins in every installed package's entry points when it builds its first
model: importlib.metadata and a scan, about 20 ms on every command. worker uses no pydantic
plugin, so its own process switches the scan off with pydantic's environment variable, here
and not on `import worker`, which would change the environment of any program importing it.
The switch is set when the operator has not set it, with a mark saying it is worker's (a
`worker serve` started by `worker supervise` inherits both); `worker.process.proc.child_env` removes
the two again, so the agents and the projects they test see the environment worker was
started with.
"""

import os

from worker import PYDANTIC_SWITCH

if PYDANTIC_SWITCH[0] not in os.environ or PYDANTIC_SWITCH[1] in os.environ:
    os.environ.update(dict.fromkeys(PYDANTIC_SWITCH, "__all__"))
