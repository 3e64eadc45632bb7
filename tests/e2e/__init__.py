"""End-to-end tests: the extender driven by a real kube-scheduler against a real API server."""
