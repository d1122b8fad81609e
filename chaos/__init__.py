"""minibroker: chaos."""
