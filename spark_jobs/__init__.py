"""minibroker: spark_jobs."""
