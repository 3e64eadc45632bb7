"""Plugins by name: their configuration, fetching guest bytes, compiling once, validating.

`config.PluginConfig` is what a scheduler profile's `pluginConfig` says of a wasm
plugin; `source.GuestSource` fetches its bytes; `compiler.GuestCompiler` compiles each
distinct guest once (with an optional on-disk artifact cache) and `validation` checks it
against the ABI before any instance runs.

See `docs/guest-authors.md` ("Configure it") and `docs/abi-notes.md`.
"""
