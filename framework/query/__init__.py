"""Queries of a running job's state (README, "Querying state"): the endpoint each
`logwheel run --serve` process answers on (`server`), how the owner of a key is found through
the computation's group (`routing`, `directory`, `placement`), and `StateClient`."""

from framework.query.client import StateClient, StateUnavailable

__all__ = ["StateClient", "StateUnavailable"]
