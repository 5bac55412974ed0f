"""Text algorithms shared by stages: sentence boundaries and chunk packing."""
