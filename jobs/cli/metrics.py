"""`rebalance metrics`: the lake's Prometheus metrics (`jobs.steps.signals`) served over HTTP, read at each scrape."""

from __future__ import annotations

import signal
import threading

from prometheus_client import start_http_server

from jobs.io.lake import Lake
from jobs.steps.signals import registry
from planner.errors import InputError, SourceError


def serve(lake: Lake, host: str, port: int) -> int:
    """Serve the lake's metrics at http://host:port/metrics until SIGTERM or Ctrl-C (port 0: any free port).

    Prints the address first (the port chosen, for port 0). Each scrape reads the lake as it is then.
    """
    if not lake.exists("generations"):
        raise InputError(f"--lake: no lake at {lake.root} (no generations table)")
    try:
        server, thread = start_http_server(port, addr=host, registry=registry(lake))
    except OSError as e:
        raise SourceError(f"metrics: cannot listen on {host}:{port}: {e.strerror or e}") from None
    print(f"serving the metrics of lake {lake.root} at http://{host}:{server.server_port}/metrics", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    return 0
