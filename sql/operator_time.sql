-- Where a traced iteration's time goes, operator by operator: torch.profiler's operator table
-- (tracker profile network|layers --trace; 3 iterations after the measurement) of each FINISHED
-- whole-network run that has one, beside its configuration and measured latency_ms. self_ms is
-- an operator's own time per iteration on the basis its trace ranks by (time_basis: self_device_ms,
-- its kernels' time on a GPU; self_cpu_ms else), share_pct its share of all the run's operators',
-- op_rank its place (1: the slowest). The profiler adds its own cost: the operators' times come from
-- traced iterations, latency_ms from the measurement before them.
SELECT
    m.run_id, m.kind, m.model, m.model_hash, m.batch_size, m.phase, m.device, m.mode, m.latency_ms,
    o.op, o.calls_per_iter,
    CASE WHEN o.time_basis = CAST('self_device_ms' AS VARCHAR) THEN o.self_device_ms ELSE o.self_cpu_ms END AS self_ms,
    o.share_pct,
    rank() OVER (
        PARTITION BY o.run_id
        ORDER BY CASE WHEN o.time_basis = CAST('self_device_ms' AS VARCHAR) THEN o.self_device_ms ELSE o.self_cpu_ms END DESC
    ) AS op_rank,
    o.self_cpu_ms, o.cpu_total_ms, o.self_device_ms, o.time_basis, o.iterations
FROM trace_ops o
JOIN measurements m ON m.run_id = o.run_id
