"""The code MLflow runs to load a registered fingerprint (MLflow's "models from code").

``fingerprint train`` logs this file as the model's code, with the booster and its spec as
artifacts and a copy of tracker.fingerprint.runtime (``code_paths``, as the top-level module
tracker_fingerprint_runtime); MLflow executes it on load, so no pickled object is stored. Where
tracker is installed, its own runtime answers, the one ``tracker predict`` uses; where it is not
(a serving environment of the version's requirements), the copy logged with the version does.
It is not imported by tracker itself.
"""

import mlflow.models

try:
    from tracker.fingerprint.runtime import FingerprintModel
except ImportError:
    from tracker_fingerprint_runtime import FingerprintModel  # type: ignore[import-not-found,no-redef]

mlflow.models.set_model(FingerprintModel())
