"""Measurements: the schema, importers (Vidur, NVIDIA's tables), the bench runner, fitting."""
