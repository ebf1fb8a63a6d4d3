"""The run path: one `worker run` (runner), the chosen task (tasks), and the loop around
the agent, iteration by iteration (loop, iteration, prompt, infra, costs, guard)."""
