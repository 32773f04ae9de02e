"""Search-space profiling (after ssprofile): accuracy and latency tables of a NAS search space,
and the candidates on its accuracy-latency frontier."""
