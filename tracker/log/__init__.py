"""Logging stage: run records, their schemas, and writers into MLflow tracking stores."""
