"""Benchmarks: scripts run as `python bench/<name>.py`, each printing figures against a baseline measured in
the same run. A package only so that the import contracts (pyproject.toml) cover it."""
