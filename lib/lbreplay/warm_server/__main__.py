"""``python -m lbreplay.warm_server --lake LAKE``: the lake's warm server (started by the first warm command)."""

from lbreplay.warm_server.server import main

main()
