"""minibroker: controller."""
