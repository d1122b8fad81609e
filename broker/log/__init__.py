"""minibroker: broker/log."""
