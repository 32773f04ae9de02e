-- Every FAILED measurement with its reason (oom, crash, killed, timeout, error or an
-- import's own) and the configuration it was: what did not run, and why. input_size,
-- precision and memory_limit_mb (since 0.9.1): a batch that ran out of a 40 MB cap is not a
-- batch the network cannot train at.
SELECT r.run_id, r.experiment, r.kind, r.run_name, r.failure_reason, r.campaign, r.end_time,
       p.model, p.batch_size, p.input_size, p.phase, p.device, p.mode, p.precision, p.memory_limit_mb
FROM runs r
LEFT JOIN (
    SELECT run_id,
           any_value(value) FILTER (WHERE key = 'model') AS model,
           TRY_CAST(any_value(value) FILTER (WHERE key = 'batch_size') AS BIGINT) AS batch_size,
           TRY_CAST(any_value(value) FILTER (WHERE key = 'input_size') AS BIGINT) AS input_size,
           any_value(value) FILTER (WHERE key = 'phase') AS phase,
           any_value(value) FILTER (WHERE key = 'device') AS device,
           any_value(value) FILTER (WHERE key = 'mode') AS mode,
           any_value(value) FILTER (WHERE key = 'precision') AS precision,
           TRY_CAST(any_value(value) FILTER (WHERE key = 'memory_limit_mb') AS DOUBLE) AS memory_limit_mb
    FROM params GROUP BY run_id
) p USING (run_id)
WHERE r.status = 'FAILED'
