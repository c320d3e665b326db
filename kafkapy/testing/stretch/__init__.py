"""Stretch clusters on emulated sites: recipes, the harness that runs them, and measurements."""
