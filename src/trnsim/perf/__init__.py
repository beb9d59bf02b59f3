"""trnsim.perf layer."""
