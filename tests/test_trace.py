"""torch.profiler's tables: operators and, on a GPU, the kernels they launched, each counted once."""

import pytest

from tracker.profile.trace import kernel_table, op_table


def _gpu_events() -> object:
    """The key averages of a real profiler event list as on a GPU: two operators whose kernels
    (80 us and 20 us of device time) are also events of their own, and a host-only call."""
    from torch.autograd import DeviceType
    from torch.autograd.profiler_util import EventList

    conv = _event(1, "aten::cudnn_convolution", 0, 0, 100, use_device="cuda")
    conv.append_kernel("xmma_fprop_kernel", 0, 60)
    conv.append_kernel("nchwToNhwcKernel", 0, 20)
    relu = _event(2, "aten::relu_", 0, 100, 130, use_device="cuda")
    relu.append_kernel("vectorized_elementwise_kernel", 0, 20)
    launch = _event(3, "cudaLaunchKernel", 0, 130, 135, use_device="cuda")
    kernels = [_event(10 + i, name, 0, start, start + us, use_device="cuda", device_type=DeviceType.CUDA)
               for i, (name, start, us) in enumerate([("xmma_fprop_kernel", 5, 60), ("nchwToNhwcKernel", 70, 20),
                                                      ("vectorized_elementwise_kernel", 110, 20)])]
    return _averages(EventList([conv, relu, launch, *kernels], use_device="cuda"))


def _event(*args: object, **kwargs: object) -> object:
    """A profiler event as torch.profiler makes them (with a stack and input shapes, if empty)."""
    from torch.autograd.profiler_util import FunctionEvent

    return FunctionEvent(*args, stack=[], input_shapes=[], **kwargs)


def _averages(events: object) -> object:
    events._build_tree()  # as torch.profiler does before its key_averages  # type: ignore[attr-defined]
    return events.key_averages()  # type: ignore[attr-defined]


def test_a_gpu_operator_table_counts_each_kernel_once() -> None:
    """Kernels are events of their own beside the operators holding their time: the operator table
    has operators only (shares of 100 us, not of 200), the kernel table the kernels."""
    averages = _gpu_events()
    ops = op_table(averages, 2, cuda=True)  # two iterations traced: times per iteration
    assert [o["op"] for o in ops] == ["aten::cudnn_convolution", "aten::relu_", "cudaLaunchKernel"]
    assert [o["self_device_ms"] for o in ops] == pytest.approx([0.04, 0.01, 0.0])
    assert [o["share_pct"] for o in ops] == pytest.approx([80.0, 20.0, 0.0])
    assert ops[0]["self_cpu_ms"] == pytest.approx(0.05) and ops[0]["calls_per_iter"] == 0.5
    kernels = kernel_table(averages, 2)
    assert [k["kernel"] for k in kernels] == ["xmma_fprop_kernel", "nchwToNhwcKernel", "vectorized_elementwise_kernel"]
    assert [k["share_pct"] for k in kernels] == pytest.approx([60.0, 20.0, 20.0])
    assert sum(k["self_device_ms"] for k in kernels) == pytest.approx(sum(o["self_device_ms"] for o in ops))


def test_a_cpu_operator_table_is_every_operator_on_cpu_time() -> None:
    from torch.autograd.profiler_util import EventList

    events = [_event(1, "aten::conv2d", 0, 0, 300), _event(2, "aten::add_", 0, 300, 400)]
    averages = _averages(EventList(events))
    ops = op_table(averages, 1, cuda=False)
    assert [(o["op"], o["share_pct"]) for o in ops] == [("aten::conv2d", pytest.approx(75.0)), ("aten::add_", pytest.approx(25.0))]
    assert "self_device_ms" not in ops[0] and kernel_table(averages, 1) == []


def test_a_gpu_trace_prints_its_longest_kernels_with_their_names_cut(capsys: pytest.CaptureFixture[str]) -> None:
    """``profile --trace`` on a GPU: the operator table, then how long the device was busy and its
    five longest kernels, a template kernel's name cut to 100 characters."""
    from tracker.cli.profile import KERNEL_NAME_CHARS, TOP_KERNELS, _trace_table

    averages = _gpu_events()
    ops, kernels = op_table(averages, 1, cuda=True), kernel_table(averages, 1)
    long_name = "void at::native::vectorized_elementwise_kernel<4, " + "x" * 300 + ">"
    kernels += [{"kernel": long_name if i == 0 else f"k{i}", "calls_per_iter": 1.0, "self_device_ms": 0.001 / (i + 1),
                 "share_pct": None} for i in range(4)]
    trace = {"iterations": 3, "traced_iteration_ms": 0.2, "time_basis": "self_device_ms", "ops": ops, "operators": 3,
             "kernels": kernels, "kernel_count": len(kernels), "device_busy_ms": 0.1,
             "artifacts": ["trace/ops.json", "trace/trace.json"]}
    _trace_table(trace, 0.15)
    out = capsys.readouterr().out
    assert "the device was busy 0.100 ms per traced iteration (50 % of it), in 7 kernels and copies; the 5 longest:" in out
    assert "waiting for the host" not in out  # busy half the time: not said to be the host's
    assert "xmma_fprop_kernel" in out and "k3" not in out and TOP_KERNELS == 5
    assert long_name[:KERNEL_NAME_CHARS - 1] + "…" in out and long_name not in out
    _trace_table({**trace, "traced_iteration_ms": 0.4}, 0.35)  # a quarter of the iteration busy
    out = capsys.readouterr().out
    assert "(25 % of it)" in out and "note: the device idles most of each iteration, waiting for the host" in out


def test_a_gpu_table_from_before_0_7_3_is_read_with_its_kernels_apart() -> None:
    """The H200's resnet18 trace as tracker 0.7.2 wrote it (its 15 top rows, kernels among the
    operators): read back, the rows without CPU time are its kernels, each part with its shares."""
    from tracker.profile.trace import normalized

    rows = [("aten::cudnn_convolution", 20, 0.8029, 2.2923, 0.3265), ("sm80_xmma_fprop_implicit_gemm", 16, 0, 0, 0.1692),
            ("nchwToNhwcKernel", 32, 0, 0, 0.113), ("aten::cudnn_batch_norm", 20, 0.444, 1.1313, 0.0536),
            ("bn_fw_inf_1C11_kernel_NCHW", 20, 0, 0, 0.0536), ("aten::clamp_min_", 17, 0.142, 0.2854, 0.0208),
            ("vectorized_elementwise_kernel", 17, 0, 0, 0.0208), ("implicit_convolve_sgemm", 1, 0, 0, 0.0183),
            ("sm80_xmma_fprop_implicit_gemm_f32", 2, 0, 0, 0.0115), ("aten::add_", 8, 0.0871, 0.1523, 0.0094),
            ("vectorized_elementwise_kernel#add", 8, 0, 0, 0.0094), ("Activity Buffer Request", 1 / 3, 0.9089, 0.9089, 0.006),
            ("Memset (Device)", 7, 0, 0, 0.0056), ("sm90_xmma_fprop_implicit_gemm", 1, 0, 0, 0.0055),
            ("aten::max_pool2d_with_indices", 1, 0.0218, 0.0307, 0.005)]
    old = {"iterations": 3, "traced_iteration_ms": 4.579, "time_basis": "self_device_ms",
           "ops": [{"op": n, "calls_per_iter": c, "self_cpu_ms": s, "cpu_total_ms": t, "self_device_ms": d, "share_pct": 0.0}
                   for n, c, s, t, d in rows]}
    table = normalized(old)
    assert [o["op"] for o in table["ops"]] == ["aten::cudnn_convolution", "aten::cudnn_batch_norm", "aten::clamp_min_",
                                               "aten::add_", "Activity Buffer Request", "aten::max_pool2d_with_indices"]
    assert table["ops"][0]["share_pct"] == pytest.approx(100 * 0.3265 / 0.4213)  # 77.5 %, not the 38 % it was shown as
    assert len(table["kernels"]) == 9 and table["kernels"][0]["kernel"] == "sm80_xmma_fprop_implicit_gemm"
    assert table["device_busy_ms"] == pytest.approx(0.4069) and sum(k["share_pct"] for k in table["kernels"]) == pytest.approx(100)
    assert normalized(table) is table  # a table with its kernels apart, or a CPU one, is read as it is
    cpu = {"iterations": 3, "time_basis": "self_cpu_ms", "ops": [{"op": "aten::conv2d", "self_cpu_ms": 1.0}]}
    assert normalized(cpu) is cpu
