"""The kube-scheduler HTTP extender: wasm plugins served to an unmodified kube-scheduler.

`protocol` (the JSON shapes), `service` (the verbs on the wasm plugins, and when a
pod's instance is held for bind), `ledger` (where each pod's cycle is, and until
when), `server` (HTTP), `binder` (the Kubernetes API Binding for pods no guest bound),
`defaults` (the options' defaults, light to import).

See `docs/extender.md`.
"""
