"""The pytest face: options, hooks, collectors, items, fixtures, xdist and report glue, progress
and pre-flight. The only package that imports pytest; ``main`` is the module pytest loads."""
