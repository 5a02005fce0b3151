"""The notebook side: the ``%%geprof`` magic, rich display and plots."""
