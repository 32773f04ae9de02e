-- Every FINISHED measurement of a configuration beside its latest run (run_id, the key
-- measurement_features gives the configuration's row), with the experiment it was logged in:
-- what a fingerprint's label is the median of. measurement_labels takes it over them all; a
-- fingerprint trained on named experiments (fingerprint train --from-experiment) over theirs alone,
-- both through the table macro measurement_labels_of.
-- speed_probe_ms: the machine's speed when it measured (tracker.profile.probe; NULL before 0.9.9),
-- speed_probe_version the version of that probe, its unit (NULL where none; since 0.9.11).
SELECT
    l.run_id,
    m.run_id AS measurement_run_id,
    m.experiment,
    m.end_time,
    m.latency_ci_rel,
    m.samples_count,
    m.latency_ms,
    m.peak_mem_mb,
    m.network_mem_mb,
    m.power_w,
    m.energy_per_iter_j,
    m.gpu_util_pct,
    m.speed_probe_ms,
    m.speed_probe_version
FROM latest_measurements l
JOIN measurements m USING (config_key)
