"""worker: run coding agents on a queue of tasks, unattended."""

__version__ = "0.1.0"

# pydantic's switch for its plugin scan, which worker's command line turns on for itself
# (worker/cli/__init__.py) and `worker.process.proc.child_env` takes out again: the name, and
# worker's mark saying that worker, not the operator, set it.
PYDANTIC_SWITCH = ("PYDANTIC_DISABLE_PLUGINS", "PYDANTIC_DISABLE_PLUGINS_SET_BY_WORKER")
