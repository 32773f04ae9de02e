-- What the layer-level fingerprint learns to predict, per layer run (a module's or the functions'
-- between modules; layer_features has the modules' alone, with their node features): the
-- median latency_ms of that layer (same index and name) over every FINISHED measurement of its
-- configuration that ran its layers (campaign repeats = R with layers, profile --again),
-- keyed by the layer run of the latest measurement that ran them (latest_layer_measurements, since
-- 0.9.11: of the latest measurement until then, so that one measured whole only later hid them), as
-- measurement_labels is for whole networks. network_latency_ms: the whole network's median over the
-- same measurements, which the calibration pairs the sum of the layers with (since 0.9.11: the network's
-- label until then, the median over its measurements whole only too). Read only when training;
-- predictions never touch it. latency_probe_ratio: the median of
-- each repeat's latency over the speed probe that bracketed its layers (tracker.profile.probe; NULL where
-- none had one, before 0.9.9), probed_repeats how many had one, as measurement_labels has them, and
-- network_probe_ratio, network_probed_repeats the same of the whole network's latency; speed_probe_version and
-- network_speed_probe_version the probes' version, where the repeats share one (else NULL; since 0.9.11).
-- Since 0.9.10 the medians are those of the table macro layer_labels_of over every experiment
-- (fingerprint train --from-experiment calls it with the experiments named).
SELECT
    run_id,
    repeats,
    latency_ms,
    latency_probe_ratio,
    probed_repeats,
    speed_probe_version,
    network_latency_ms,
    network_probe_ratio,
    network_probed_repeats,
    network_speed_probe_version
FROM layer_labels_of(CAST(NULL AS VARCHAR[]))
