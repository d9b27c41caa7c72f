"""A bare static group member as `logwheel run` configures its consumer
(`framework.kafka.config.consumer_config`): prints each assignment; with `--die-on-revoke` it
SIGKILLs itself the moment it is asked to give partitions up, before it can rejoin.

    python -m tests.integration.group_member BOOTSTRAP TOPIC GROUP INSTANCE [--die-on-revoke]
"""

from __future__ import annotations

import os
import signal
import sys

from confluent_kafka import Consumer

from framework.kafka.config import consumer_config


def main() -> None:
    bootstrap, topic, group, instance = sys.argv[1:5]
    die = "--die-on-revoke" in sys.argv[5:]
    consumer = Consumer(consumer_config(bootstrap, group=group, instance=instance))

    def on_assign(_consumer: Consumer, tps: list) -> None:
        print("assigned", sorted(tp.partition for tp in tps), flush=True)

    def on_revoke(_consumer: Consumer, tps: list) -> None:
        if die and tps:
            os.kill(os.getpid(), signal.SIGKILL)

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    while True:
        consumer.poll(0.2)


if __name__ == "__main__":
    main()
