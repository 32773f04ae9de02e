"""Profiling stage: measure networks and layers on a device, honestly and cheaply."""
