"""Zoo stage: the networks the tracker measures (torchvision by name; generators later)."""

from tracker.zoo.torchvision_zoo import build_model, check_model_name, classification_models, default_input_size

__all__ = ["build_model", "check_model_name", "classification_models", "default_input_size"]
