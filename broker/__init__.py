"""minibroker: broker."""
