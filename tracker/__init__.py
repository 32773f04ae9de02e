"""tracker: a database-backed experiment tracker for deep-network performance profiling.

Nothing heavy is imported here: torch and mlflow are imported lazily by the stages that
need them, so that ``tracker --help`` stays instant.
"""

__version__ = "0.9.35"
