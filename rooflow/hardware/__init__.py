"""The machines: the device catalogue (datasheet roofs, SLURM resources), roofline arithmetic and the
CPU's per-microarchitecture peaks, and what the running host reports about itself (environment).

Imports only rooflow's base modules (errors, io, units, logs, config_io).
"""
