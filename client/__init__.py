"""minibroker: client."""
