"""Why a step is as long as it is: its dependency graph, critical path, what-if re-timing and slow steps."""
