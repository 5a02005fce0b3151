"""Shared test helpers: runs, clusters, real-data fixtures, the browser and msprof-analyze drivers.

Imported as ``from helpers.<module> import ...`` (pyproject puts ``tests`` on the test path).
"""
