"""What runs leave behind and where: the SQLite store, run records and reports,
retention, the state folder, atomic files, the heartbeat."""
