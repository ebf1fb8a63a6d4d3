"""waits."""
