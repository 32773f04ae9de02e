"""Importers: measurements made elsewhere, turned into tracker runs with the same records."""
