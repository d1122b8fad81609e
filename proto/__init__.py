"""minibroker: proto."""
