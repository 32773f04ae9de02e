"""Short training of a candidate on a real small dataset available offline, and its validation
accuracy: scikit-learn's bundled handwritten digits (1797 8x8 images, 10 classes), or an image
folder of the user's (one folder per class). Images are resized to the space's input size and,
when grey, repeated to three channels; a fixed stratified 80/20 split from the seed."""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from tracker.errors import ConfigError, MeasurementError

VAL_SHARE = 0.2


@dataclass
class Split:
    x_train: Any
    y_train: Any
    x_val: Any
    y_val: Any
    classes: int


@lru_cache(maxsize=4)
def load_split(dataset: str, input_size: int, seed: int, base: str = ".") -> Split:
    import numpy as np
    import torch

    if dataset == "digits":
        from sklearn.datasets import load_digits

        digits = load_digits()
        x = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
        y = torch.tensor(digits.target, dtype=torch.int64)
    else:
        from tracker.data.datasets import open_dataset

        path = (Path(base) / dataset).resolve()
        if not path.is_dir():  # open_dataset would name a training job's key, [data].path
            raise ConfigError(f"[accuracy].dataset {dataset!r}: {path} is not a folder (give \"digits\", scikit-learn's "
                              "8x8 digits, or a folder of class folders of images, relative to the space's file)")
        data = open_dataset(path, "imagefolder", input_size)
        items = [data[i] for i in range(len(data))]
        good = [it for it in items if isinstance(it, tuple)]
        if not good:
            raise ConfigError(f"[accuracy].dataset {dataset}: no readable image in {path}")
        x = torch.stack([im for im, _ in good])
        y = torch.tensor([label for _, label in good], dtype=torch.int64)
    x = torch.nn.functional.interpolate(x, size=(input_size, input_size), mode="bilinear", align_corners=False)
    if x.shape[1] == 1:
        x = x.repeat(1, 3, 1, 1)
    x = (x - x.mean()) / x.std()
    rng = np.random.default_rng(seed)
    val = []
    for label in y.unique().tolist():  # stratified: the same share of each class held out
        idx = np.flatnonzero(y.numpy() == label)
        val += rng.choice(idx, size=max(1, int(round(VAL_SHARE * len(idx)))), replace=False).tolist()
    mask = torch.zeros(len(y), dtype=torch.bool)
    mask[val] = True
    if bool(mask.all()):  # every candidate a FAILED run ("total_steps, but got 0"), at every re-run, until 0.9.8
        raise ConfigError(f"[accuracy].dataset {dataset!r}: its {len(y)} image(s) in {len(y.unique())} class(es) are all "
                          f"held out for validation ({VAL_SHARE:.0%} of each class, at least one): none left to train on; "
                          "give each class two images or more")
    return Split(x[~mask], y[~mask], x[mask], y[mask], int(y.max()) + 1)


@dataclass
class AccuracyResult:
    val_accuracy: float
    train_loss: float
    train_time_s: float
    train_count: int
    val_count: int


def train_and_evaluate(spec: dict[str, Any], split: Split, epochs: int, batch_size: int, learning_rate: float,
                       seed: int) -> AccuracyResult:
    """Train the candidate ``epochs`` times over the training split (SGD, momentum 0.9, cosine
    schedule) and score it on the validation split. A loss that leaves the finite numbers (a learning
    rate too large) is a MeasurementError: such a model's accuracy is a guess's, not a measurement
    (its ~10 % was invented, and its NaN loss, refused by the log, ended the whole run until 0.9.8)."""
    import torch

    from tracker.zoo.generator import build_generated

    if split.classes > spec["num_classes"]:
        raise ConfigError(f"the dataset has {split.classes} classes but the space's num_classes is {spec['num_classes']}")
    torch.manual_seed(seed)
    model = build_generated(spec).train()
    steps = epochs * ((len(split.y_train) + batch_size - 1) // batch_size)
    optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate, momentum=0.9, weight_decay=5e-4)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=learning_rate, total_steps=steps)
    criterion = torch.nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(seed)
    t0 = time.perf_counter()
    loss = torch.tensor(0.0)
    for epoch in range(epochs):
        order = torch.randperm(len(split.y_train), generator=g)
        for i in range(0, len(order), batch_size):
            batch = order[i:i + batch_size]
            optimizer.zero_grad(set_to_none=True)
            loss = criterion(model(split.x_train[batch]), split.y_train[batch])
            if not bool(torch.isfinite(loss)):
                raise MeasurementError(f"loss is {float(loss.detach())} at epoch {epoch + 1} of {epochs} (learning_rate "
                                       f"{learning_rate:g}: a smaller one)")
            loss.backward()
            optimizer.step()
            schedule.step()
    train_time = time.perf_counter() - t0
    model.eval()
    with torch.inference_mode():
        correct = sum(int((model(split.x_val[i:i + 256]).argmax(1) == split.y_val[i:i + 256]).sum())
                      for i in range(0, len(split.y_val), 256))
    return AccuracyResult(correct / len(split.y_val), float(loss.detach()), train_time, len(split.y_train), len(split.y_val))
