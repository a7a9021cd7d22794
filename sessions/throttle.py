"""Message-rate limits for the play page's channels (WebSocket and data channel)."""

import time


class TokenBucket:
    """Allows `rate` events a second with bursts of `burst`; floods are dropped, not queued."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate, self.burst = rate, burst
        self.tokens = burst
        self.updated = time.monotonic()

    def allow(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


# The limits every play channel shares, so a room's audience is held to the player's own.
def socket_message_limit() -> TokenBucket:
    """Messages on a page's WebSocket (the play page's and a live room's): 10 a second."""
    return TokenBucket(rate=10, burst=20)


def prompt_limit() -> TokenBucket:
    """Sentences for the world, from the player or a spectator: one every 2 s, bursts of 4."""
    return TokenBucket(rate=0.5, burst=4)
