"""trnsim.core layer."""
