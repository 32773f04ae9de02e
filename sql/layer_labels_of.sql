-- A table macro, not a view: layer_labels_of(experiments), the labels the layer-level fingerprint
-- learns from, per layer run of a configuration's latest measurement that ran its layers
-- (latest_layer_measurements, as layer_features keys them; since 0.9.11: the latest measurement until
-- then, so a configuration measured again whole only lost its layer labels), taken over the measurements
-- of the experiments named alone (a list of their names; NULL: every experiment's): each layer's (same
-- index and name) median latency_ms over every FINISHED measurement of its configuration in them that ran
-- its layers. layer_labels is layer_labels_of(NULL); fingerprint train --from-experiment calls it with the
-- experiments it was told (since 0.9.10: before, the layer level learnt every experiment's layers, and its
-- calibration paired them with the named experiments' network labels). latency_probe_ratio: the median of
-- each repeat's latency over the speed probe that bracketed its layers (tracker.profile.probe; NULL where
-- none had one), probed_repeats how many had one. network_latency_ms: the whole network's median latency
-- over the same measurements (those that ran the layer), network_probe_ratio its median over the probe timed
-- beside the network and network_probed_repeats how many had one: what the calibration pairs the sum of the
-- layers with (since 0.9.11; before, the network's label, the median over every measurement of it, those
-- measured whole only too). Beside layer_labels' columns: label_experiments (the experiments named that
-- measured the layer) and label_run_ids (the layer runs its label is the median of). speed_probe_version and
-- network_speed_probe_version (since 0.9.11): the version of the probe every repeat of the layer, and of the
-- whole network, that timed one timed, where they share one and each says which; NULL otherwise. Example:
-- SELECT * FROM layer_labels_of(['demo']).
CREATE MACRO layer_labels_of(experiments) AS TABLE
SELECT
    cur.run_id,
    CAST(count(*) AS BIGINT) AS repeats,
    median(l.latency_ms) AS latency_ms,
    median(l.latency_ms / l.speed_probe_ms) AS latency_probe_ratio,
    CAST(count(l.speed_probe_ms) AS BIGINT) AS probed_repeats,
    CASE WHEN count(l.speed_probe_version) = count(l.speed_probe_ms) AND min(l.speed_probe_version) = max(l.speed_probe_version)
         THEN min(l.speed_probe_version) END AS speed_probe_version,
    median(m.latency_ms) AS network_latency_ms,
    median(m.latency_ms / m.speed_probe_ms) AS network_probe_ratio,
    CAST(count(m.speed_probe_ms) AS BIGINT) AS network_probed_repeats,
    CASE WHEN count(m.speed_probe_version) = count(m.speed_probe_ms) AND min(m.speed_probe_version) = max(m.speed_probe_version)
         THEN min(m.speed_probe_version) END AS network_speed_probe_version,
    list_sort(list_distinct(list(m.experiment))) AS label_experiments,
    list_sort(list(l.run_id)) AS label_run_ids
FROM layer_runs cur
JOIN latest_layer_measurements lm ON lm.run_id = cur.parent_run_id
JOIN measurements m ON m.config_key = lm.config_key
JOIN layer_runs l ON l.parent_run_id = m.run_id AND l.layer_index = cur.layer_index AND l.layer_name = cur.layer_name
WHERE cur.status = CAST('FINISHED' AS VARCHAR)
    AND l.status = CAST('FINISHED' AS VARCHAR)
    AND l.latency_ms IS NOT NULL
    AND (CAST(experiments AS VARCHAR[]) IS NULL
         OR list_contains(CAST(experiments AS VARCHAR[]), CAST(m.experiment AS VARCHAR)))
GROUP BY cur.run_id
