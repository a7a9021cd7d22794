"""Tools that drive a running site from outside, like a player would: `python -m tools.bench`
(input-to-frame latency in a browser), `python -m tools.soak` (players coming and going), and
the pieces the play tests share (a Python play client, malformed messages, network namespaces).
Needs the dev requirements; nothing in the site imports this package."""
