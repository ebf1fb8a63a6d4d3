"""What differs between Linux, macOS and Windows, kept in one place.

- `process`: process groups, Windows jobs, ending whole trees, pid identity, orphans;
- `winjob`: the Windows Job Object (ctypes);
- `names`: file names valid on every file system;
- `shell`: the platform's shell for configured command lines;
- `schedule`: what starts `worker run` on each platform (cron, a systemd timer, Task Scheduler).
"""
