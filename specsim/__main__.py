"""`python -m specsim ...` runs the CLI."""

from specsim.cli.main import main

main()
