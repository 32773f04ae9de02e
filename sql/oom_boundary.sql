-- Out-of-memory boundary per network, phase, device, number format and memory cap: the largest batch size that
-- ran, the smallest that failed with reason oom, how many sizes failed that way, and the device's
-- memory (MB) where its runs recorded it. Runs under a memory cap (memory_limit_mb, memory_cap:
-- --memory-limit-mb, a smaller device) have a boundary of their own; NULL: no cap. A capped row's
-- device_memory_mb is still the device's: its boundary lies under memory_limit_mb MB beyond what the
-- measuring child held when the cap was set, not under the device's memory.
-- smallest_failed_batch, smallest_failed_reason: the smallest size that failed for any reason, and
-- why: perf4sight's imported failures (perf4sight_failed: "mostly out of memory", its README says)
-- are not called oom, but show here where they lie. input_size (since 0.9.0) tells apart one
-- network at two sizes (two description hashes).
WITH attempts AS (
    SELECT w.run_id, w.status, r.failure_reason, w.model, w.model_hash, w.input_size, w.phase, w.device, w.mode, w.precision, w.batch_size,
           w.device_name, w.device_memory_mb, w.memory_limit_mb, w.memory_cap
    FROM whole_network_runs w
    JOIN runs r USING (run_id)
)
SELECT
    model, model_hash, CAST(input_size AS BIGINT) AS input_size, phase, device_name, device, mode, precision,
    memory_limit_mb, memory_cap,
    max(batch_size) FILTER (WHERE status = 'FINISHED') AS largest_fitting_batch,
    min(batch_size) FILTER (WHERE status = 'FAILED' AND failure_reason = 'oom') AS smallest_oom_batch,
    count(*) FILTER (WHERE status = 'FAILED' AND failure_reason = 'oom') AS oom_runs,
    min(batch_size) FILTER (WHERE status = 'FAILED') AS smallest_failed_batch,
    arg_min(failure_reason, batch_size) FILTER (WHERE status = 'FAILED') AS smallest_failed_reason,
    max(device_memory_mb) AS device_memory_mb
FROM attempts
GROUP BY model, model_hash, input_size, phase, device_name, device, mode, precision, memory_limit_mb, memory_cap
HAVING count(*) FILTER (WHERE status = 'FAILED') > 0
    OR max(batch_size) FILTER (WHERE status = 'FINISHED') IS NOT NULL
