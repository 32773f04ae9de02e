"""The code MLflow runs to load a registered fingerprint (MLflow's "models from code").

``fingerprint train`` logs this file as the model's code, with the booster and its spec as
artifacts; MLflow executes it on load, so no pickled object is stored. It is not imported by
tracker itself. The model is tracker.fingerprint.served.FingerprintModel.
"""

import mlflow.models

from tracker.fingerprint.served import FingerprintModel

mlflow.models.set_model(FingerprintModel())
