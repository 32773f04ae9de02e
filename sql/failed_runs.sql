-- Every FAILED measurement with its reason (oom, crash, killed, timeout, error or an
-- import's own) and the configuration it was: what did not run, and why.
SELECT r.run_id, r.experiment, r.kind, r.run_name, r.failure_reason, r.campaign, r.end_time,
       p.model, p.batch_size, p.phase, p.device, p.mode
FROM runs r
LEFT JOIN (
    SELECT run_id,
           any_value(value) FILTER (WHERE key = 'model') AS model,
           TRY_CAST(any_value(value) FILTER (WHERE key = 'batch_size') AS BIGINT) AS batch_size,
           any_value(value) FILTER (WHERE key = 'phase') AS phase,
           any_value(value) FILTER (WHERE key = 'device') AS device,
           any_value(value) FILTER (WHERE key = 'mode') AS mode
    FROM params GROUP BY run_id
) p USING (run_id)
WHERE r.status = 'FAILED'
