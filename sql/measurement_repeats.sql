-- Configurations measured more than once (a campaign's `repeats`, `tracker profile ... --again`,
-- or the same configuration in two experiments): how far the repeats' medians lie apart. A measurement's CI
-- covers its own sampling window; the spread between repeats taken at different times is the
-- machine's drift, which no single window can see. latest_measurements keeps the newest.
SELECT
    config_key,
    any_value(model) AS model,
    any_value(batch_size) AS batch_size,
    any_value(phase) AS phase,
    any_value(device_name) AS device_name,
    any_value(mode) AS mode,
    CAST(count(*) AS BIGINT) AS repeats,
    min(latency_ms) AS min_latency_ms,
    median(latency_ms) AS median_latency_ms,
    max(latency_ms) AS max_latency_ms,
    CAST(max(latency_ms) / min(latency_ms) - 1.0 AS DOUBLE) AS repeat_spread_rel,
    max(latency_ci_rel) AS max_ci_rel,
    min(end_time) AS first_end_time,
    max(end_time) AS last_end_time
FROM measurements
WHERE latency_ms IS NOT NULL
GROUP BY config_key
HAVING count(*) > 1
ORDER BY repeat_spread_rel DESC
