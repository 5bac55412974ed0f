"""Text algorithms shared by stages (pure functions, no Arrow)."""
