"""worker: run coding agents on a queue of tasks, unattended."""

__version__ = "0.1.0"
