"""trnsim.workloads layer."""
