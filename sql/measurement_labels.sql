-- What a fingerprint learns to predict, per configuration: the median of every FINISHED
-- measurement of it (campaign repeats = R, profile --again), keyed by its latest run, as
-- measurement_features is. One measurement on a noisy machine is one draw: repeats minutes
-- apart differ by more than each one's CI (see measurement_repeats), and their median is the
-- steadier label. Read only when training; predictions never touch it.
-- latency_probe_ratio: the median of each measurement's latency over the speed probe timed beside it
-- (tracker.profile.probe), the latency in the machine's units, which its speed moving between repeats
-- moves less; speed_probe_ms the probe's median, probed_repeats how many repeats had one (since 0.9.9);
-- speed_probe_version the probe's version where every repeat with one timed that one (else NULL; since 0.9.11).
-- Since 0.9.10 the medians are those of the table macro measurement_labels_of over every experiment
-- (fingerprint train --from-experiment calls it with the experiments named).
-- tensor_peak_mb (since 0.9.34): on a CPU, the tensors' own peak over a step, where measured.
-- latency_ci_rel and samples_count (since 0.9.19): those of the newest measurement the labels are the
-- median of; a measurement too imprecise to learn from (its CI wider than 25 % of its latency) is left
-- out of them where the configuration has one within it (measurement_labels_of says how).
SELECT
    run_id,
    repeats,
    latency_ms,
    peak_mem_mb,
    network_mem_mb,
    tensor_peak_mb,
    power_w,
    energy_per_iter_j,
    gpu_util_pct,
    latency_probe_ratio,
    speed_probe_ms,
    probed_repeats,
    speed_probe_version,
    latency_ci_rel,
    samples_count
FROM measurement_labels_of(CAST(NULL AS VARCHAR[]))
