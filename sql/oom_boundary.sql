-- Out-of-memory boundary per network, phase and device: the largest batch size that ran,
-- the smallest that failed with reason oom, and how many sizes failed that way.
WITH attempts AS (
    SELECT r.run_id, r.status, r.failure_reason, n.model, n.model_hash, n.phase, n.device, n.mode, n.batch_size,
           COALESCE(e.device_model, CASE WHEN n.device LIKE 'cuda%' THEN e.gpu_name END, e.cpu_model, n.device) AS device_name
    FROM runs r
    JOIN (SELECT run_id, model, model_hash, phase, device, mode, batch_size FROM network_runs
          UNION ALL
          SELECT run_id, model, model_hash, phase, device, mode, batch_size FROM training_runs) n USING (run_id)
    LEFT JOIN environments e USING (run_id)
)
SELECT
    model, model_hash, phase, device_name, device, mode,
    max(batch_size) FILTER (WHERE status = 'FINISHED') AS largest_fitting_batch,
    min(batch_size) FILTER (WHERE status = 'FAILED' AND failure_reason = 'oom') AS smallest_oom_batch,
    count(*) FILTER (WHERE status = 'FAILED' AND failure_reason = 'oom') AS oom_runs
FROM attempts
GROUP BY model, model_hash, phase, device_name, device, mode
HAVING count(*) FILTER (WHERE status = 'FAILED' AND failure_reason = 'oom') > 0
    OR max(batch_size) FILTER (WHERE status = 'FINISHED') IS NOT NULL
