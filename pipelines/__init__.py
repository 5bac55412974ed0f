"""Pipeline recipes: plain Python modules with a `build() -> list[Stage]` function."""
