"""trnsim's command line: a thin layer over library functions (one module per verb)."""
