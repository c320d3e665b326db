"""Wiring: a configured node (broker, controller, or both) assembled from the packages below."""
