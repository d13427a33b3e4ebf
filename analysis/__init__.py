"""Analysis: load result files into pandas, build the tables people read."""
