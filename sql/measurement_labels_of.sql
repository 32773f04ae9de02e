-- A table macro, not a view: measurement_labels_of(experiments), the labels a fingerprint learns from,
-- per configuration, taken over the measurements of the experiments named alone (a list of their names;
-- NULL: every experiment's). measurement_labels is measurement_labels_of(NULL); fingerprint train
-- --from-experiment calls it with the experiments it was told (since 0.9.10 the one definition of both,
-- which had a twin in Python until then). Beside measurement_labels' columns: experiment, latency_ci_rel
-- and samples_count of the newest of those measurements, label_experiments (the experiments named that
-- measured it) and label_run_ids (the runs its labels are the median of). speed_probe_version (since
-- 0.9.11): the version of the speed probe every repeat that timed one timed, where they share one and each
-- says which (its unit: the ratio and the median probe mean something only then); NULL otherwise. Example:
-- SELECT * FROM measurement_labels_of(['demo']).
-- Since 0.9.19 a measurement whose latency's 95 % CI is wider than 25 % of it (tracker.profile.stats
-- IMPRECISE_CI_REL: the time cap came before the precision, a disturbed machine) is left out of its
-- configuration's labels where one of the same experiments measured it within that (a campaign measures
-- such a one again at twice its time cap); a configuration with none within it keeps them all, and
-- latency_ci_rel says it. Until then a disturbed repeat moved the median, and its CI, when newest, left
-- the configuration out of training though a precise repeat was there.
-- Since 0.9.27 network_mem_mb is the median of the measurements that counted what this tracker counts
-- (labelled_measurements' network_mem_current): NULL where none did, a configuration a network_mem_mb
-- fingerprint then leaves out until it is measured again.
-- Since 0.9.34 tensor_peak_mb, the median of the measurements that counted it (on a CPU, tracker 0.9.31
-- or later; the same to the byte in every process, so the median of one figure): NULL where none did.
CREATE MACRO measurement_labels_of(experiments) AS TABLE
WITH named AS (
    SELECT *, COALESCE(latency_ci_rel <= CAST(0.25 AS DOUBLE), true) AS precise
    FROM labelled_measurements
    WHERE CAST(experiments AS VARCHAR[]) IS NULL
        OR list_contains(CAST(experiments AS VARCHAR[]), experiment)
), kept AS (
    SELECT *
    FROM named
    QUALIFY precise OR NOT bool_or(precise) OVER (PARTITION BY run_id)
)
SELECT
    run_id,
    CAST(count(*) AS BIGINT) AS repeats,
    median(latency_ms) AS latency_ms,
    median(peak_mem_mb) AS peak_mem_mb,
    median(network_mem_mb) FILTER (WHERE network_mem_current) AS network_mem_mb,
    median(tensor_peak_mb) AS tensor_peak_mb,
    median(power_w) AS power_w,
    median(energy_per_iter_j) AS energy_per_iter_j,
    median(gpu_util_pct) AS gpu_util_pct,
    median(latency_ms / speed_probe_ms) AS latency_probe_ratio,
    median(speed_probe_ms) AS speed_probe_ms,
    CAST(count(speed_probe_ms) AS BIGINT) AS probed_repeats,
    CASE WHEN count(speed_probe_version) = count(speed_probe_ms) AND min(speed_probe_version) = max(speed_probe_version)
         THEN min(speed_probe_version) END AS speed_probe_version,
    arg_max(experiment, end_time) AS experiment,
    arg_max(latency_ci_rel, end_time) AS latency_ci_rel,
    arg_max(samples_count, end_time) AS samples_count,
    list_sort(list_distinct(list(experiment))) AS label_experiments,
    list_sort(list(measurement_run_id)) AS label_run_ids
FROM kept
GROUP BY run_id
