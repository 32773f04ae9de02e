-- Where a traced iteration's device time goes, kernel by kernel: the kernels and memory copies of
-- each FINISHED whole-network run traced on a GPU (tracker profile network|layers --trace, since
-- tracker 0.7.3), beside its configuration and measured latency_ms. self_device_ms is a kernel's
-- device time per traced iteration, share_pct its share of the device's busy time, kernel_rank its
-- place (1: the longest), device_busy_ms the sum over the run's kernels. Against the traced
-- iteration's wall time the busy time says whether the device or the host launching kernels set
-- the pace (operator_time holds the operators that launched them).
SELECT
    m.run_id, m.kind, m.model, m.model_hash, m.batch_size, m.phase, m.device, m.mode, m.latency_ms,
    k.kernel, k.calls_per_iter, k.self_device_ms, k.share_pct,
    rank() OVER (PARTITION BY k.run_id ORDER BY k.self_device_ms DESC) AS kernel_rank,
    sum(k.self_device_ms) OVER (PARTITION BY k.run_id) AS device_busy_ms,
    k.iterations
FROM trace_kernels k
JOIN measurements m ON m.run_id = k.run_id
