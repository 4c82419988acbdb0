"""One router per resource of the HTTP API: simulations, jobs, searches, comparisons, presets, health."""
