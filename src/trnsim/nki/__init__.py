"""trnsim.nki layer."""
