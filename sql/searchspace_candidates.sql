-- Search-space candidates (tracker searchspace run): per search space and candidate, the latest
-- validation accuracy next to the latest latency of each source (measured by the profilers or
-- predicted by the fingerprints), device and batch size, and whether the candidate is on that
-- source's accuracy-latency Pareto frontier: no other candidate of the space is at least as
-- accurate and at least as fast, and better in one of the two. outside_trained_range (JSON) lists
-- a predicted latency's features beyond what its fingerprint learnt from; NULL when inside.
WITH acc AS (
    SELECT search_space, model, candidate, CAST(val_accuracy AS DOUBLE) AS accuracy, epochs, dataset,
           run_id AS accuracy_run_id
    FROM accuracy_runs
    WHERE status = 'FINISHED' AND search_space IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY search_space, model ORDER BY end_time DESC, run_id) = 1
),
lat AS (
    SELECT search_space, model, latency_source, device, CAST(batch_size AS BIGINT) AS batch_size,
           CAST(latency_ms AS DOUBLE) AS latency_ms, CAST(device_time_s AS DOUBLE) AS device_time_s,
           CAST(outside_trained_range AS VARCHAR) AS outside_trained_range, run_id AS latency_run_id
    FROM candidate_runs
    WHERE status = 'FINISHED'
    QUALIFY row_number() OVER (PARTITION BY search_space, model, latency_source, device, batch_size
                               ORDER BY end_time DESC, run_id) = 1
),
joined AS (
    SELECT a.search_space, a.model, a.candidate, a.accuracy, a.epochs, a.dataset,
           l.latency_source, l.device, l.batch_size, l.latency_ms, l.device_time_s, l.outside_trained_range,
           a.accuracy_run_id, l.latency_run_id
    FROM acc a
    JOIN lat l USING (search_space, model)
)
SELECT
    j.*,
    NOT EXISTS (
        SELECT 1
        FROM joined o
        WHERE o.search_space = j.search_space AND o.latency_source = j.latency_source
          AND o.device = j.device AND o.batch_size = j.batch_size
          AND o.accuracy >= j.accuracy AND o.latency_ms <= j.latency_ms
          AND (o.accuracy > j.accuracy OR o.latency_ms < j.latency_ms)
    ) AS on_frontier
FROM joined j
ORDER BY j.search_space, j.latency_source, j.device, j.batch_size, j.latency_ms
