"""The agent in a box: the runtime around its command (box), the hosts it may reach
(hosts), what the box refused it (record, report), and `[sandbox]` (settings)."""
