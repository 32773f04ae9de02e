"""Zoo stage: the networks the tracker measures.

Torchvision classification, detection and segmentation models by name (built with ``weights=None``),
PerfSeer-style generated networks and channel-pruned networks, both kept as JSON specs.
"""

from tracker.zoo.spec import ModelRef, resolve
from tracker.zoo.torchvision_zoo import (
    all_models,
    build_model,
    check_model_name,
    classification_models,
    default_input_size,
    detection_models,
    segmentation_models,
)

__all__ = [
    "ModelRef",
    "all_models",
    "build_model",
    "check_model_name",
    "classification_models",
    "default_input_size",
    "detection_models",
    "resolve",
    "segmentation_models",
]
