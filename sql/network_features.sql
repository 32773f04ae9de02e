-- Network features at batch size 1: aggregates of the per-node rows of network_nodes
-- (totals, per-category counts, FLOPs and bytes), one row per described network. The
-- fingerprints train and predict on exactly these columns.
-- Per-category figures are count_if and sum(CASE ...) rather than FILTER clauses: the same
-- values, and DuckDB binds and plans them in about two thirds of the time, paid at every
-- prediction (the in-memory warehouse of tracker predict runs this view for each network).
SELECT
    d.model_hash,
    any_value(d.model) AS model,
    any_value(d.input_size) AS input_size,
    CAST(sum(n.params) AS BIGINT) AS params,
    CAST(sum(n.flops) AS BIGINT) AS flops,
    CAST(sum(n.macs) AS BIGINT) AS macs,
    CAST(sum(n.elementwise_ops) AS BIGINT) AS elementwise_ops,
    CAST(sum(n.weight_bytes) AS BIGINT) AS weight_bytes,
    CAST(sum(n.activation_out_bytes) AS BIGINT) AS activation_bytes,
    CAST(sum(n.saved_activation_bytes) AS BIGINT) AS saved_activation_bytes,
    CAST(sum(n.kept_activation_bytes) AS BIGINT) AS kept_activation_bytes,
    CAST(sum(n.bytes_read) AS BIGINT) AS bytes_read,
    CAST(sum(n.bytes_written) AS BIGINT) AS bytes_written,
    CAST(max(n.activation_out_bytes) AS BIGINT) AS largest_activation_bytes,
    CAST(max(n.live_activation_bytes) AS BIGINT) AS live_activation_bytes,
    CAST(count(*) AS BIGINT) AS nodes,
    CAST(any_value(d.edges) AS BIGINT) AS edges,
    CAST(count_if(n.category IN ('conv', 'dwconv', 'gconv', 'linear', 'norm', 'act', 'pool', 'elementwise', 'concat')) AS BIGINT) AS functional_layers,
    CAST(count_if(n.category IN ('conv', 'dwconv', 'gconv', 'linear')) AS BIGINT) AS weighted_layers,
    CAST(count_if(n.category = 'conv') AS BIGINT) AS conv_count,
    CAST(COALESCE(sum(CASE WHEN n.category = 'conv' THEN n.flops END), 0) AS BIGINT) AS conv_flops,
    CAST(COALESCE(sum(CASE WHEN n.category = 'conv' THEN n.bytes_read + n.bytes_written END), 0) AS BIGINT) AS conv_bytes,
    CAST(count_if(n.category = 'dwconv') AS BIGINT) AS dwconv_count,
    CAST(COALESCE(sum(CASE WHEN n.category = 'dwconv' THEN n.flops END), 0) AS BIGINT) AS dwconv_flops,
    CAST(COALESCE(sum(CASE WHEN n.category = 'dwconv' THEN n.bytes_read + n.bytes_written END), 0) AS BIGINT) AS dwconv_bytes,
    CAST(count_if(n.category = 'gconv') AS BIGINT) AS gconv_count,
    CAST(COALESCE(sum(CASE WHEN n.category = 'gconv' THEN n.flops END), 0) AS BIGINT) AS gconv_flops,
    CAST(COALESCE(sum(CASE WHEN n.category = 'gconv' THEN n.bytes_read + n.bytes_written END), 0) AS BIGINT) AS gconv_bytes,
    CAST(count_if(n.category = 'linear') AS BIGINT) AS linear_count,
    CAST(COALESCE(sum(CASE WHEN n.category = 'linear' THEN n.flops END), 0) AS BIGINT) AS linear_flops,
    CAST(COALESCE(sum(CASE WHEN n.category = 'linear' THEN n.bytes_read + n.bytes_written END), 0) AS BIGINT) AS linear_bytes,
    CAST(count_if(n.category = 'norm') AS BIGINT) AS norm_count,
    CAST(COALESCE(sum(CASE WHEN n.category = 'norm' THEN n.bytes_read + n.bytes_written END), 0) AS BIGINT) AS norm_bytes,
    CAST(count_if(n.category = 'act') AS BIGINT) AS act_count,
    CAST(COALESCE(sum(CASE WHEN n.category = 'act' THEN n.bytes_read + n.bytes_written END), 0) AS BIGINT) AS act_bytes,
    CAST(count_if(n.category = 'pool') AS BIGINT) AS pool_count,
    CAST(COALESCE(sum(CASE WHEN n.category = 'pool' THEN n.bytes_read + n.bytes_written END), 0) AS BIGINT) AS pool_bytes,
    CAST(count_if(n.category = 'elementwise') AS BIGINT) AS elementwise_count,
    CAST(COALESCE(sum(CASE WHEN n.category = 'elementwise' THEN n.bytes_read + n.bytes_written END), 0) AS BIGINT) AS elementwise_bytes,
    CAST(count_if(n.category = 'concat') AS BIGINT) AS concat_count,
    CAST(COALESCE(sum(CASE WHEN n.category = 'concat' THEN n.bytes_read + n.bytes_written END), 0) AS BIGINT) AS concat_bytes
FROM network_descriptions d
JOIN network_nodes n USING (model_hash)
GROUP BY d.model_hash
