"""Proof, above storage: `verify` (the reference verifier) and `fast` (the compiled one's driver),
`report` (what they find), `merkle` and `checkpoint` (signed checkpoints and inclusion proofs,
RFC 9162), `redact` (removing a value while keeping every digest checkable). Imports storage and
the workflow's state machine, never the Gate or the analytics."""
