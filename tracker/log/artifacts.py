"""Reading a run's artifacts back without leaving copies behind.

``mlflow.artifacts.download_artifacts`` without a destination copies into a fresh temporary
folder that nothing removes: every ``tracker predict`` of a layer-level champion, every
``tracker fingerprint train`` that meets a champion and every ``tracker report`` left one in
the system's temporary folder. Here the copy lives as long as the ``with`` block.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def downloaded(tracking_uri: str, run_id: str, artifact_path: str) -> Iterator[Path]:
    """A local copy of one artifact (file or folder) of ``run_id``, removed when the block ends."""
    import tempfile

    import mlflow

    with tempfile.TemporaryDirectory(prefix="tracker-artifact-") as tmp:
        yield Path(mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path=artifact_path, dst_path=tmp,
                                                       tracking_uri=tracking_uri))
