"""One gossip member as its own process, for tests that kill and restart members:

    python gossip_node.py NODE_ID SEEDS

SEEDS is a comma-separated list (may be empty). It binds 127.0.0.1 on a free port with the membership
defaults (push-pull admission included) and the 10x faster timings of ``udp_helpers.FAST``, prints
``address HOST:PORT``, joins through the seeds and prints ``joined ANSWERED SECONDS``; then, for every
line ``stats`` on stdin, prints ``stats JSON`` (its ``Gossip.stats()`` and its members' states). It stops
when stdin closes.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from udp_helpers import FAST, SECRET

from membership import Gossip

JOIN_TIMEOUT_S = 10.0


async def main(node_id: str, seeds: list[str]) -> None:
    gossip = Gossip(node_id, "127.0.0.1:0", SECRET, meta=node_id.encode(), config=FAST)
    await gossip.start()
    print(f"address {gossip.address}", flush=True)
    started = time.monotonic()
    answered = await gossip.join(seeds, timeout_s=JOIN_TIMEOUT_S) if seeds else 0
    print(f"joined {answered} {time.monotonic() - started:.3f}", flush=True)
    try:
        while line := await asyncio.to_thread(sys.stdin.readline):
            if line.strip() == "stats":
                states = {m.node_id: m.state.value for m in gossip.members()}
                print("stats " + json.dumps({**gossip.stats(), "states": states}), flush=True)
    finally:
        await gossip.stop()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], [s for s in sys.argv[2].split(",") if s]))
