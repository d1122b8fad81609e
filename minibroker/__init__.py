"""minibroker: minibroker."""
