"""supervision."""
