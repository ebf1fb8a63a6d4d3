"""Processes: the one place worker starts them (proc), their output (boundedio),
groups, signals and orphans, the run lock, git's safe calls and worktrees, what differs
between operating systems (platform)."""
