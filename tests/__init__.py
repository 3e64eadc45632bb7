"""The project's tests: unit, conformance, concurrency stress."""
