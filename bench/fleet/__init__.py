"""`make bench-fleet` (`python -m bench.fleet`): a fleet of agent-like workers driving
`leasegate.client.Dispatch` through the production stack, against a provider-fidelity mock
upstream with token buckets and rate-limit headers (docs/performance.md, "Third wave: the
fleet")."""
