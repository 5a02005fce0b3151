"""The profiling system: options, enable bits, trace points, reporters and the
simulated msprof library that writes run directories."""
