"""The Kubernetes objects a guest reads: Pod, Node and NodeList as protobuf bytes.

This sub-package owns the wire form of those objects, from the host's dicts (the shape
``kubectl get -o yaml`` prints) to the bytes the guest's host functions hand over:

- `schema`: the protobuf messages themselves (names, numbers, types), built at import
  into a private descriptor pool; no protoc step, no generated module.
- `codec`: dict -> bytes for v1.Pod, v1.Node and v1.NodeList, and `KubeCodecError`.
  The host only encodes: no guest export hands a Kubernetes object back.
- `wire_cache`: the bytes made once per object version and shared by a plugin's
  instances.

It lives under ``actors/`` because its one user is the guest's host functions
(`actors.host_functions`), which give these bytes to the guest.

See `docs/abi-notes.md` ("The objects a guest reads").
"""
