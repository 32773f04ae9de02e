-- Every whole-network run, inference (network runs) and training (training runs), FINISHED
-- or FAILED (or KILLED: a training job stopped), in one shape, with the device it ran on: the board for imported data
-- (env.device_model), the GPU for cuda, else the CPU model. measurements and oom_boundary read it.
-- page_faults_per_iter_count: memory the C allocator took afresh from the kernel per iteration
-- (see the allocator of the CPU mode); NULL where not counted (imported data, older runs).
-- device_memory_mb: the memory peak_mem_mb is bounded by (the GPU's for cuda, else the machine's,
-- a Jetson's shared by CPU and GPU); NULL where the run did not record it (runs of tracker 0.5.0 and earlier).
-- memory_limit_mb, memory_cap: the memory cap a run was measured under (--memory-limit-mb: growth over
-- what the measuring child held, a smaller device) and how it held (resident or address-space); NULL: none.
-- latency_p90_ms, latency_p99_ms: tail latency, where a run had samples enough to tell (20 and 200;
-- tracker.profile.stats.TAIL_BEYOND); NULL otherwise (fewer samples, runs before tracker 0.7.2, imports).
-- network_mem_mb: on a CPU, what the network added to the measuring process's resident memory at its peak
-- (peak_mem_mb less what the process held before the network was built: the interpreter and torch, about
-- 550 MB, which made a 32 px network's peak_mem_mb rank nothing); NULL on cuda and before tracker 0.9.0.
-- tensor_peak_mb: on a CPU, the most bytes of tensors alive at once over one step (weights, input, activations,
-- gradients, the optimizer's state; tracker.profile.tensors), the same in every process, where network_mem_mb moves
-- with where the C allocator put them (a training job's over one more step on its last batch); NULL on cuda
-- (cuda_max_allocated_mb), for imports, and for runs before tracker 0.9.31.
-- memory_cap_used_mb: under a resident cap, how far the child's memory rose over what it held then (at the
-- highest), the quantity memory_limit_mb bounds; NULL otherwise.
-- cpu_util_pct, cpu_util_others_pct: how busy the machine's CPUs were over the window, and the share other
-- processes took (the machine's use less the measuring process's, since tracker 0.7.5); NULL where not measured.
-- host_share_pct: on a GPU, the share of each iteration the host spent launching its work (near 100: bound by
-- the host's CPU, not the device); NULL on a CPU (the host is the device) and for runs before tracker 0.8.4.
-- speed_probe_ms: the speed probe's median beside the window (tracker.profile.probe: a fixed workload, the
-- machine's speed when it measured; since tracker 0.9.9); NULL for imports and older runs.
-- speed_probe_version: the version of that probe (tag tracker.speed_probe; tracker.profile.probe.PROBE_VERSION),
-- its unit: probes of two versions are not compared; NULL where the run has no probe (since tracker 0.9.11).
-- tracker_version: the tracker that measured it (tag tracker.version; NULL for imports and runs logged without
-- one), which says what a figure whose meaning a version changed counts (labelled_measurements'
-- network_mem_current; since tracker 0.9.27).
-- A RUNNING run is left out: tracker writes a run once it is measured, so one still RUNNING is a write cut
-- short (a process killed while it wrote to a tracking server), never a measurement under way.
WITH whole AS (
    SELECT CAST('network' AS VARCHAR) AS kind, run_id, experiment, config_key, source, campaign, end_time, status,
           model, model_hash, batch_size, input_size, phase, device, precision, mode,
           latency_ms, latency_ci_rel, latency_iqr_ms, latency_p90_ms, latency_p99_ms, samples_count, throughput_per_s,
           peak_mem_mb, network_mem_mb, tensor_peak_mb, power_w, energy_per_iter_j, gpu_util_pct, cpu_util_pct, cpu_util_others_pct,
           stop_reason,
           page_faults_per_iter_count, host_share_pct, speed_probe_ms, speed_probe_version,
           memory_limit_mb, memory_cap, memory_cap_used_mb
    FROM network_runs
    UNION ALL BY NAME
    SELECT CAST('training' AS VARCHAR) AS kind, run_id, experiment, config_key, source, campaign, end_time, status,
           model, model_hash, batch_size, input_size, phase, device, precision, mode,
           latency_ms, latency_ci_rel, latency_iqr_ms, latency_p90_ms, latency_p99_ms, samples_count, throughput_per_s,
           peak_mem_mb, network_mem_mb, tensor_peak_mb, power_w, energy_per_iter_j, gpu_util_pct, cpu_util_pct, cpu_util_others_pct,
           stop_reason,
           page_faults_per_iter_count, host_share_pct, speed_probe_ms, speed_probe_version,
           memory_limit_mb, memory_cap, memory_cap_used_mb
    FROM training_runs
)
SELECT
    w.*,
    COALESCE(e.device_model, CASE WHEN w.device LIKE 'cuda%' THEN e.gpu_name END, e.cpu_model, w.device) AS device_name,
    e.host, e.threads,
    CAST(CASE WHEN w.device LIKE 'cuda%' THEN e.gpu_memory_total_mb ELSE e.memory_total_mb END AS DOUBLE)
        AS device_memory_mb,
    v.value AS tracker_version
FROM whole w
LEFT JOIN environments e USING (run_id)
LEFT JOIN tags v ON v.run_id = w.run_id AND v.key = CAST('tracker.version' AS VARCHAR)
WHERE w.status NOT IN (CAST('RUNNING' AS VARCHAR), CAST('SCHEDULED' AS VARCHAR))
