"""Analysis: load result files into pandas; tables as data, rendered to the console, markdown, CSV and figures."""
