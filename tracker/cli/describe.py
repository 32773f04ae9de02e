"""``tracker describe``: a network's graph and features, as the warehouse and fingerprints see them."""

from __future__ import annotations

from typing import Annotated

import typer

from tracker.cli.options import (BatchSizeOption, FormatOption, InputSizeOption, OutputFormat, emit_json, logging_nothing,
                                 model_reference)


def describe(
    model: Annotated[str, typer.Argument(callback=model_reference, help="Zoo model name, network spec file, or FILE.py:NAME (a network of your own).")],
    batch_size: BatchSizeOption = 1,
    input_size: InputSizeOption = None,
    nodes: Annotated[bool, typer.Option("--nodes", help="Include one row per node (a table, or node_rows in JSON).")] = False,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Describe a network: parameters, FLOPs, MACs, activations, depth (JSON: per-category sums too)."""
    with logging_nothing("describe logs nothing, so nothing is lost"):
        from tracker.describe import describe as describe_ref
        from tracker.describe.features import aggregates, node_rows
        from tracker.zoo.spec import shape_text

        desc = describe_ref(model, input_size)
        rows = node_rows(desc, batch_size)
        data = {"model": desc.name, "description_hash": desc.description_hash, "method": desc.method,
                "notes": desc.notes, **aggregates(desc, batch_size, rows), "in_channels": desc.image[1] if desc.image else None,
                "input_shape": desc.input_shape[1:]}
        if not desc.image:  # token ids below it, or None: input of another kind (not said until 0.9.3)
            from tracker.zoo.spec import resolve

            data["input_vocab"] = resolve(model).input_vocab
        if nodes:
            data["node_rows"] = rows
        if fmt is OutputFormat.json:
            emit_json(data)
            return
        for note in desc.notes:
            typer.echo(f"note: {note}")
        shape = ("input_size", "in_channels") if desc.image else ("input_shape", "input_vocab")  # images, or one input's shape
        for key in ("model", "description_hash", "method", "batch_size", *shape, "params", "flops", "macs",
                    "activation_bytes", "saved_activation_bytes", "kept_activation_bytes", "largest_activation_bytes",
                    "live_activation_bytes", "nodes", "edges", "functional_layers", "depth"):
            value = data[key] if key != "input_shape" else shape_text(data[key])
            if value is None:
                continue
            typer.echo(f"{key:>25}: {value:,}" if isinstance(value, int) else f"{key:>25}: {value}")
        if nodes:  # one row per node, as the warehouse's network_nodes has them (the table lacked them until 0.9.1)
            from rich.table import Table

            from tracker.console import wide_console

            table = Table("#", "name", "kind", "category", "out_shape", "params", "macs", "activation_out_bytes")
            for r in rows:
                table.add_row(str(r["node_index"]), str(r["name"]), str(r["kind"]), str(r["category"]), str(r["out_shape"]),
                              f"{r['params']:,}", f"{r['macs']:,}", f"{r['activation_out_bytes']:,}")
            wide_console(160).print(table)
