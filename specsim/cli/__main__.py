"""`python -m specsim.cli ...` runs the CLI (same as the `specsim` script)."""

from specsim.cli.main import main

main()
