-- Per-layer features at batch size 1: every module call of every described network (one
-- row per node of network_nodes whose op is call_module), with the module's qualified name
-- (module_target, e.g. layer1.0.conv1) and its input channels read from its input shape.
-- The layer-level fingerprint predicts each row and sums a network.
SELECT
    n.model_hash,
    n.model,
    n.node_index,
    n.name AS module_name,
    n.target AS module_target,
    n.kind,
    n.category,
    CAST(COALESCE(TRY_CAST(split_part(n.in_shape, 'x', 2) AS BIGINT), 0) AS BIGINT) AS in_channels,
    CAST(COALESCE(n.out_channels, 0) AS BIGINT) AS out_channels,
    CAST(COALESCE(n.out_h, 0) AS BIGINT) AS out_h,
    CAST(COALESCE(n.out_w, 0) AS BIGINT) AS out_w,
    CAST(COALESCE(n.kernel_h, 0) AS BIGINT) AS kernel_h,
    CAST(COALESCE(n.stride_h, 0) AS BIGINT) AS stride_h,
    CAST(COALESCE(n.groups, 1) AS BIGINT) AS groups,
    CAST(n.params AS BIGINT) AS params,
    CAST(n.flops AS BIGINT) AS flops,
    CAST(n.macs AS BIGINT) AS macs,
    CAST(n.elementwise_ops AS BIGINT) AS elementwise_ops,
    CAST(n.weight_bytes AS BIGINT) AS weight_bytes,
    CAST(n.activation_in_bytes AS BIGINT) AS activation_in_bytes,
    CAST(n.activation_out_bytes AS BIGINT) AS activation_out_bytes
FROM network_nodes n
WHERE n.op = 'call_module'
