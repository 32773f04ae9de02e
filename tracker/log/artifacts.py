"""Reading a run's artifacts back without leaving copies behind.

``mlflow.artifacts.download_artifacts`` without a destination copies into a fresh temporary
folder that nothing removes: every ``tracker predict`` of a layer-level champion, every
``tracker fingerprint train`` that meets a champion and every ``tracker report`` left one in
the system's temporary folder. Here the copy lives as long as the ``with`` block.

MLflow draws a progress bar on stderr for each download where tqdm is installed (it was on the
H200 machine, and ``runs compare`` printed two bars above its table there): reading back an
artifact of tracker's own is no download a user asked for, so the bars are off for the block,
unless ``MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR`` is set.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: MLflow's switch of its download progress bars.
PROGRESS_BAR_VARIABLE = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"


@contextmanager
def downloaded(tracking_uri: str, run_id: str, artifact_path: str) -> Iterator[Path]:
    """A local copy of one artifact (file or folder) of ``run_id``, removed when the block ends."""
    import tempfile

    import mlflow

    with tempfile.TemporaryDirectory(prefix="tracker-artifact-") as tmp:
        with quiet_downloads():
            path = mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path=artifact_path, dst_path=tmp,
                                                       tracking_uri=tracking_uri)
        yield Path(path)


def artifact_bytes(tracking_uri: str, run_id: str, artifact_path: str) -> bytes:
    """One artifact file of ``run_id``, read whole; a :class:`DamagedArtifactError` saying so where it
    cannot be had (gone from the run's artifacts: MLflow's exception, or the file system's)."""
    from mlflow.exceptions import MlflowException

    from tracker.errors import DamagedArtifactError, first_line

    try:
        with downloaded(tracking_uri, run_id, artifact_path) as path:
            return path.read_bytes()
    except (OSError, MlflowException) as exc:
        raise DamagedArtifactError(f"{artifact_path} cannot be read ({first_line(exc)}); deleted?") from None


@contextmanager
def quiet_downloads() -> Iterator[None]:
    """MLflow's download progress bars off inside the block, unless the variable says otherwise."""
    import os

    if PROGRESS_BAR_VARIABLE in os.environ:
        yield
        return
    os.environ[PROGRESS_BAR_VARIABLE] = "false"
    try:
        yield
    finally:
        os.environ.pop(PROGRESS_BAR_VARIABLE, None)
