"""The typer application: thin; parses, calls the layers below, formats."""
