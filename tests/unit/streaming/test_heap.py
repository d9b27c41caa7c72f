import gc
import weakref

from framework.streaming.heap import trim_heap


class _Client:
    """Stands for a membership's client, which reaches its membership through a callback."""


def test_a_membership_held_only_by_its_own_cycle_is_freed_at_once():
    gc.disable()  # as if the collector had not come round yet
    try:
        client = _Client()
        client.callback = client.__init__  # a bound method: the cycle a rebalance callback makes
        gone = weakref.ref(client)
        del client
        assert gone() is not None
        trim_heap()
        assert gone() is None
    finally:
        gc.enable()
