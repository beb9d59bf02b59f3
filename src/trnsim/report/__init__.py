"""trnsim.report layer."""
