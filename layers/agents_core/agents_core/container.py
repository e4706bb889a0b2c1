"""What lives as long as the Lambda container: everything a function's init built."""

from __future__ import annotations

import gc


def init_done() -> None:
    """Called last in an entry point's init. The modules, the app and the clients built so far
    (about 100,000 objects in a streaming function) live as long as the container, so they are
    moved out of the garbage collector's reach (`gc.freeze`): its full collections walked them
    all, about 30 ms of CPU at a full core (a third of a second at 192 MB) every so many
    requests. With SnapStart the snapshot holds them frozen already."""
    gc.collect()
    gc.freeze()
