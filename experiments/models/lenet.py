"""MNIST's LeNet, a network of your own for tracker: ``tracker profile network experiments/models/lenet.py:lenet``.

Grey images (one channel) of 28 pixels, as the file says below; the second pooling adapts to
whatever size it is given (``--input-size``), so it runs at others too.
"""

from torch import nn

INPUT_SIZE = 28
INPUT_CHANNELS = 1


def lenet() -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
                         nn.AdaptiveMaxPool2d(5), nn.Flatten(), nn.Linear(16 * 5 * 5, 120), nn.ReLU(), nn.Linear(120, 10))
