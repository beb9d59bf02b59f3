"""trnsim.fabric layer."""
