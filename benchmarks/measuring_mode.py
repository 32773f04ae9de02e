"""The arguments benchmarks/profiling_cost.py and benchmarks/layer_cost.py share, not a benchmark:
``[cpu|cuda] [BATCH] [THREADS] [ALLOCATOR]`` read from the command line, checked (one line naming
the script on bad input) and the CPU mode applied to this process.

THREADS is torch's intra-op thread count (``cpu_threads`` by default on cpu, ``all`` for torch's
own on cuda or when asked); ALLOCATOR the C allocator mode (``system`` by default, or ``retain``).
"""

import sys


def measuring_mode(script: str, cpu_threads: int) -> tuple[str, int, str]:
    """Device, batch size and allocator from ``sys.argv[1:5]``, threads and allocator applied."""
    device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    if device not in ("cpu", "cuda"):
        sys.exit(f"{script}: device {device!r}: expected cpu or cuda")
    batch = sys.argv[2] if len(sys.argv) > 2 else "1"
    if not batch.isdigit() or int(batch) < 1:
        sys.exit(f"{script}: batch size {batch!r}: expected a whole number of at least 1")
    threads = sys.argv[3] if len(sys.argv) > 3 else (str(cpu_threads) if device == "cpu" else "all")
    if threads != "all" and (not threads.isdigit() or int(threads) < 1):
        sys.exit(f"{script}: threads {threads!r}: expected a whole number of at least 1, or all")
    allocator = sys.argv[4] if len(sys.argv) > 4 else "system"
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        sys.exit(f"{script}: device cuda: torch sees no CUDA device here")

    from tracker.errors import TrackerError
    from tracker.profile.modes import apply_allocator, apply_threads

    try:
        if threads != "all":
            apply_threads(int(threads))
        apply_allocator(allocator)
    except TrackerError as e:
        sys.exit(f"{script}: {e}")
    return device, int(batch), allocator
