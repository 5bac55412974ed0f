"""`python -m dataclean` works the same as the `dataclean` command."""

from dataclean.cli import main

main()
