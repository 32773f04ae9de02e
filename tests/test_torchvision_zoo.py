from __future__ import annotations

import subprocess
import sys

# Run in a fresh interpreter: this test process has imported torchvision (and torch._dynamo) already.
PROBE = """
import sys
from tracker.zoo.torchvision_zoo import import_torchvision

tv = import_torchvision()
import torch

print("dynamo imported by torchvision:", "torch._dynamo" in sys.modules or "_dynamo" in torch.__dict__)
model = tv.models.resnet18(weights=None).eval()
with torch.inference_mode():
    print("resnet18 output:", tuple(model(torch.ones(1, 3, 64, 64)).shape))
boxes = torch.tensor([[0.0, 0.0, 0.0, 7.0, 7.0]])
print("roi_align output:", tuple(tv.ops.roi_align(torch.ones(1, 2, 8, 8), boxes, 2).shape))
print("dynamo imported by a forward pass:", "torch._dynamo" in sys.modules)

# The name torchvision took from the stand-in imports the real module when called.
deferred = sys.modules["torchvision.ops.roi_align"].is_compile_supported
print("deferred answer:", deferred("cpu"))
import torch._dynamo.utils

print("real answer:", torch._dynamo.utils.is_compile_supported("cpu"))
print("real module:", torch._dynamo.utils.__file__.endswith("_dynamo/utils.py"))
compiled = torch.compile(lambda x: torch.relu(x) * 2, backend="eager")
print("compiled:", compiled(torch.tensor([-1.0, 3.0])).tolist())
"""


def test_torchvision_imports_without_torch_dynamo_which_stays_importable() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = dict(line.split(": ", 1) for line in out.stdout.splitlines())
    assert lines == {
        "dynamo imported by torchvision": "False",
        "resnet18 output": "(1, 1000)",
        "roi_align output": "(1, 2, 2, 2)",
        "dynamo imported by a forward pass": "False",
        "deferred answer": "True",
        "real answer": "True",
        "real module": "True",
        "compiled": "[0.0, 6.0]",
    }, out.stdout
