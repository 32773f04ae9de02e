"""``tracker profile``: measure one network configuration and log it."""

from __future__ import annotations

from typing import Annotated

import typer

from tracker.cli.options import (
    BatchSizeOption,
    Device,
    FormatOption,
    OutputFormat,
    PrecisionOption,
    TimeCapOption,
    emit_json,
    state,
)

app = typer.Typer(help="Measure networks on this machine and log each measurement as an MLflow run.", no_args_is_help=True)

ModelArg = Annotated[str, typer.Argument(help="Zoo model name (see `tracker zoo list`) or network spec file.")]


def _run(ctx: typer.Context, model: str, batch_size: int, device: Device, precision: float, time_cap: float, layers: bool, fmt: OutputFormat) -> None:
    from tracker.profile.api import profile_network
    from tracker.profile.device import check_device
    from tracker.profile.network import NetworkSpec
    from tracker.profile.stats import Stopping
    from tracker.zoo import resolve

    ref = resolve(model)  # before the store is opened: a typo creates nothing
    check_device(device.value)
    spec = NetworkSpec(model=model, batch_size=batch_size, input_size=ref.input_size, device=device.value)
    rule = Stopping(target_ci_rel=precision, time_cap_s=time_cap)
    layer_rule = Stopping(target_ci_rel=max(precision, 0.05), time_cap_s=min(time_cap, 1.0), warmup_cap_s=0.5)
    result = profile_network(state(ctx).logger(), spec, rule, layers=layers, layer_rule=layer_rule)
    data = result.as_dict()
    if fmt is OutputFormat.json:
        emit_json(data)
        return
    note = " (already measured: reused)" if result.reused else ""
    typer.echo(
        f"{model} bs{batch_size} {device.value}: {data['latency_ms']:.3f} ms median, "
        f"±{100 * data['ci_rel']:.1f}% (95% CI), {data['samples']} samples, "
        f"stopped on {data['stop_reason']}{note}; run {data['run_id']}"
    )
    if layers and "layers" in data:
        typer.echo(f"{len(data['layers'])} layer runs; sum of layers / network = {data['sum_of_layers_ratio']:.2f}")


@app.command("network")
def network(
    ctx: typer.Context,
    model: ModelArg,
    batch_size: BatchSizeOption = 1,
    device: Annotated[Device, typer.Option(help="Device to run on.")] = Device.cpu,
    precision: PrecisionOption = 0.02,
    time_cap: TimeCapOption = 10.0,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Whole-network inference latency at one batch size."""
    _run(ctx, model, batch_size, device, precision, time_cap, False, fmt)


@app.command("layers")
def layers(
    ctx: typer.Context,
    model: ModelArg,
    batch_size: BatchSizeOption = 1,
    device: Annotated[Device, typer.Option(help="Device to run on.")] = Device.cpu,
    precision: PrecisionOption = 0.02,
    time_cap: TimeCapOption = 10.0,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Whole-network latency plus each layer alone on its real input (nested layer runs)."""
    _run(ctx, model, batch_size, device, precision, time_cap, True, fmt)
